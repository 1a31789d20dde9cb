// Throwaway redis-server processes for tests: single nodes (Redlock, restarts) and small Redis
// Clusters, each on its own port and temp dir, never outliving the process that started them.
// Node built-ins only; needs `redis-server` and `redis-cli` on PATH (scripts/ensure-services.sh).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInThisContext } from 'node:vm';

const HOST = '127.0.0.1' as const;
const READY_TIMEOUT_MS = 10_000;
const REBIND_TIMEOUT_MS = 5_000;
const STOP_GRACE_MS = 5_000;
const CLUSTER_TIMEOUT_MS = 20_000;
const START_ATTEMPTS = 5;

/** One redis-server child process on 127.0.0.1. */
export interface RedisNode {
  host: '127.0.0.1';
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Working dir (log file `redis.log`, cluster `nodes.conf`); removed by stop(). */
  dir: string;
  /** Kills the server (SIGTERM by default), waits for it to exit and removes its dir. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** restart on the same port with the same args (empty data: no persistence) */
  restart(): Promise<void>;
  /** The server's pid while it runs. */
  pid(): number | undefined;
}

/** A Redis Cluster of masters only (no replicas), all slots assigned. */
export interface RedisClusterHandle {
  nodes: RedisNode[];
  /** Node urls, for a cluster client's startup nodes. */
  seeds: string[];
  /** Stops every node of the cluster. */
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Process-wide bookkeeping. Jest gives every test file its own copy of `process` whose 'exit'
// event never fires, so the state and the exit hook live on the real process object (reached
// through the main V8 context), shared by every test file the process runs.

interface SharedState {
  /** redis-server children still running. */
  children: Set<ChildProcess>;
  /** Node dirs not yet removed. */
  dirs: Set<string>;
  /** Every node not yet stopped, for stopAll(). */
  nodes: Set<RedisNode>;
  /** Kills registered pids when this process dies, however it dies (see startWatchdog). */
  watchdog?: ChildProcess;
}

const STATE_KEY = Symbol.for('nestjs-distributed-lock/test/redis-servers');

/** The Node process itself, not Jest's per-file copy of it. */
function realProcess(): NodeJS.Process {
  try {
    const candidate: unknown = runInThisContext('process');
    if (typeof candidate === 'object' && candidate !== null && 'pid' in candidate) {
      return candidate as NodeJS.Process;
    }
  } catch {
    // not reachable: fall back to the global one
  }
  return process;
}

function shared(): SharedState {
  const host = realProcess();
  const slot = host as unknown as Record<symbol, SharedState | undefined>;
  const existing = slot[STATE_KEY];
  if (existing) return existing;
  const state: SharedState = { children: new Set(), dirs: new Set(), nodes: new Set() };
  slot[STATE_KEY] = state;
  host.on('exit', () => {
    for (const child of state.children) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of state.dirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // best effort
      }
    }
  });
  return state;
}

// A tiny Node process reading "+pid N" / "-pid N" / "+dir D" / "-dir D" lines on stdin. Its stdin
// closes when this process dies, even by SIGKILL or when Jest force-kills a worker (neither runs
// 'exit' handlers); it then SIGKILLs the pids still registered (checking /proc that each is still
// a redis-server) and removes the dirs.
const WATCHDOG_SOURCE = `
const fs = require('fs');
const sets = { pid: new Set(), dir: new Set() };
let buf = '';
for (const s of ['SIGINT', 'SIGHUP']) process.on(s, () => {});
const isRedis = (pid) => {
  if (!fs.existsSync('/proc/self/comm')) return true;
  try { return fs.readFileSync('/proc/' + pid + '/comm', 'utf8').startsWith('redis-server'); }
  catch { return false; }
};
const finish = () => {
  for (const pid of sets.pid) {
    if (isRedis(Number(pid))) { try { process.kill(Number(pid), 'SIGKILL'); } catch {} }
  }
  for (const dir of sets.dir) { try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 }); } catch {} }
  process.exit(0);
};
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  const lines = (buf + d).split('\\n');
  buf = lines.pop();
  for (const line of lines) {
    const m = /^([+-])(pid|dir) (.+)$/.exec(line);
    if (m) { if (m[1] === '+') sets[m[2]].add(m[3]); else sets[m[2]].delete(m[3]); }
  }
});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
`;

/** Tells the watchdog to take care of (`+`) or forget (`-`) a pid or a dir. */
function watchdogSay(op: '+' | '-', kind: 'pid' | 'dir', value: string | number): void {
  const state = shared();
  if (!state.watchdog || state.watchdog.exitCode !== null || state.watchdog.signalCode !== null) {
    const wd = spawn(process.execPath, ['-e', WATCHDOG_SOURCE], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: false,
    });
    wd.on('error', () => undefined);
    wd.stdin?.on('error', () => undefined);
    (wd.stdin as Socket | null)?.unref();
    wd.unref();
    state.watchdog = wd;
  }
  state.watchdog.stdin?.write(`${op}${kind} ${value}\n`);
}

/** Registers (or forgets) a node dir, removed at exit if still there. */
function trackDir(dir: string, track: boolean): void {
  const state = shared();
  if (track) state.dirs.add(dir);
  else state.dirs.delete(dir);
  watchdogSay(track ? '+' : '-', 'dir', dir);
}

// ---------------------------------------------------------------------------------------------
// Raw RESP over net.

/** Index just past the RESP2 reply starting at `at`, or -1 while `buf` does not hold all of it. */
function replyEnd(buf: Buffer, at: number): number {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return -1;
  const type = String.fromCharCode(buf[at]);
  const n = Number(buf.toString('latin1', at + 1, eol));
  let pos = eol + 2;
  if (type === '$') {
    if (n < 0) return pos;
    return buf.length >= pos + n + 2 ? pos + n + 2 : -1;
  }
  if (type === '*') {
    for (let i = 0; i < n && pos >= 0; i++) pos = replyEnd(buf, pos);
    return pos;
  }
  return pos; // + - :
}

function rawCommand(port: number, args: readonly string[], timeoutMs: number): Promise<string> {
  const request =
    `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    let settled = false;
    const socket = createConnection({ host: HOST, port });
    const settle = (error: Error | null, reply?: string): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(reply ?? '');
    };
    socket.setTimeout(timeoutMs, () =>
      settle(new Error(`no reply from 127.0.0.1:${port} to ${args[0]} within ${timeoutMs} ms`)),
    );
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = replyEnd(received, 0);
      if (end >= 0) settle(null, received.toString('utf8', 0, end));
    });
    socket.on('error', (error) => settle(error));
    socket.on('close', () =>
      settle(new Error(`127.0.0.1:${port} closed the connection before replying to ${args[0]}`)),
    );
  });
}

/**
 * Sends one command over a fresh TCP connection and returns the raw RESP2 reply text, e.g.
 * `+PONG\r\n`, `$-1\r\n`, `-ERR ...\r\n` (error replies resolve). Rejects on connection errors
 * (`code: 'ECONNREFUSED'` when nothing listens) and after 5 s without a reply.
 */
export function redisCommand(port: number, ...args: (string | number)[]): Promise<string> {
  return rawCommand(port, args.map(String), 5_000);
}

// ---------------------------------------------------------------------------------------------
// Ports.

function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen({ port, host: HOST, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

function ephemeralRangeStart(): number {
  try {
    const start = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(start) && start > 0 ? start : 32768;
  } catch {
    return 32768;
  }
}

/**
 * A port free on 127.0.0.1 right now (checked by binding a server to it, then closing it).
 * Prefers ports just below the kernel's ephemeral range, which outgoing connections never take,
 * so a stopped node's port stays free for its restart; falls back to port 0 (any free port).
 */
export async function findFreePort(): Promise<number> {
  const start = ephemeralRangeStart();
  const span = Math.min(10_000, start - 1025);
  for (let attempt = 0; attempt < 20 && span > 0; attempt++) {
    const port = await tryListen(start - 1 - Math.floor(Math.random() * span));
    if (port !== undefined) return port;
  }
  const port = await tryListen(0);
  if (port === undefined) throw new Error('findFreePort: cannot bind any port on 127.0.0.1');
  return port;
}

// ---------------------------------------------------------------------------------------------
// Processes.

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A redis-server failing to start; `addressInUse` when it could not bind its port(s). */
class RedisStartError extends Error {
  constructor(
    message: string,
    readonly addressInUse: boolean,
  ) {
    super(message);
    this.name = 'RedisStartError';
  }
}

interface Running {
  child: ChildProcess;
  exited: Promise<void>;
  alive: boolean;
  /** How it ended, once it has. */
  outcome?: string;
}

function logTail(file: string, from: number, lines = 20): string {
  try {
    const text = readFileSync(file).subarray(from).toString('utf8').trimEnd();
    return text ? text.split('\n').slice(-lines).join('\n') : '(log empty)';
  } catch {
    return '(no log)';
  }
}

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** Spawns redis-server once and waits until it, and not some other process, answers PING. */
async function launch(port: number, args: readonly string[], dir: string): Promise<Running> {
  const state = shared();
  const logFile = join(dir, 'redis.log');
  const logFrom = fileSize(logFile);
  const argv = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    dir,
    ...args,
  ];
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn('redis-server', argv, { cwd: dir, stdio: ['ignore', fd, fd], detached: false });
  } finally {
    closeSync(fd); // the child has its own copy
  }
  child.unref(); // a forgotten node must not keep the test process alive; it dies with it
  const pid = child.pid;
  let markExited: () => void = () => undefined;
  const running: Running = {
    child,
    alive: true,
    exited: new Promise<void>((resolve) => (markExited = resolve)),
  };
  const done = (outcome: string): void => {
    if (!running.alive) return;
    running.alive = false;
    running.outcome = outcome;
    state.children.delete(child);
    if (pid !== undefined) watchdogSay('-', 'pid', pid);
    markExited();
  };
  child.once('exit', (code, signal) => done(signal ? `killed by ${signal}` : `exit code ${code}`));
  child.once('error', (error) =>
    done(
      `${error.message}: is the Debian package redis-server installed? ` +
        '(see scripts/ensure-services.sh)',
    ),
  );
  if (pid !== undefined) {
    state.children.add(child);
    watchdogSay('+', 'pid', pid);
  }

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!running.alive) {
      const tail = logTail(logFile, logFrom);
      throw new RedisStartError(
        `redis-server on port ${port} failed to start (${running.outcome}). Log tail:\n${tail}`,
        /Address already in use/i.test(tail),
      );
    }
    if (pid !== undefined && (await answersAs(port, pid))) return running;
    if (Date.now() > deadline) {
      child.ref();
      child.kill('SIGKILL');
      await running.exited;
      throw new RedisStartError(
        `redis-server on port ${port} did not answer PING within ${READY_TIMEOUT_MS / 1000} s. ` +
          `Log tail:\n${logTail(logFile, logFrom)}`,
        false,
      );
    }
    await sleep(20);
  }
}

/** True when 127.0.0.1:port answers PING and is the redis-server with this pid. */
async function answersAs(port: number, pid: number): Promise<boolean> {
  try {
    if ((await rawCommand(port, ['PING'], 1_000)) !== '+PONG\r\n') return false;
    const info = await rawCommand(port, ['INFO', 'server'], 1_000);
    return info.includes(`\r\nprocess_id:${pid}\r\n`);
  } catch {
    return false;
  }
}

/** launch(), retrying for a while when the (fixed) port is still taken. */
async function launchOnFixedPort(
  port: number,
  args: readonly string[],
  dir: string,
): Promise<Running> {
  const deadline = Date.now() + REBIND_TIMEOUT_MS;
  for (;;) {
    try {
      return await launch(port, args, dir);
    } catch (error) {
      if (!(error instanceof RedisStartError && error.addressInUse) || Date.now() > deadline) {
        throw error;
      }
      await sleep(100);
    }
  }
}

interface Plan {
  port: number;
  args: string[];
}

class ManagedRedisNode implements RedisNode {
  readonly host = HOST;
  readonly url: string;
  private running: Running | undefined;

  constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: readonly string[],
    running: Running,
  ) {
    this.url = `redis://${HOST}:${port}`;
    this.running = running;
    shared().nodes.add(this);
  }

  pid(): number | undefined {
    return this.running?.alive ? this.running.child.pid : undefined;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.kill(signal);
    rmSync(this.dir, { recursive: true, force: true });
    trackDir(this.dir, false);
    shared().nodes.delete(this);
  }

  async restart(): Promise<void> {
    await this.kill('SIGTERM');
    mkdirSync(this.dir, { recursive: true }); // after stop() the dir is gone: start afresh
    trackDir(this.dir, true);
    shared().nodes.add(this);
    this.running = await launchOnFixedPort(this.port, this.args, this.dir);
  }

  private async kill(signal: NodeJS.Signals): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (!running?.alive) return;
    running.child.ref(); // keep the event loop alive until the exit is seen
    running.child.kill(signal);
    const force = setTimeout(() => running.child.kill('SIGKILL'), STOP_GRACE_MS);
    await running.exited;
    clearTimeout(force);
  }
}

/** Makes a node dir and starts a server in it, choosing a new plan after a port collision. */
async function startNode(
  plan: (dir: string) => Promise<Plan>,
  fixedPort: boolean,
): Promise<RedisNode> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-node-'));
  trackDir(dir, true);
  try {
    for (let attempt = 1; ; attempt++) {
      const { port, args } = await plan(dir);
      try {
        const running = fixedPort
          ? await launchOnFixedPort(port, args, dir)
          : await launch(port, args, dir);
        return new ManagedRedisNode(port, dir, args, running);
      } catch (error) {
        const retry = error instanceof RedisStartError && error.addressInUse;
        if (fixedPort || !retry || attempt >= START_ATTEMPTS) throw error;
      }
    }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    trackDir(dir, false);
    throw error;
  }
}

/** Starts every node in parallel; if any fails, stops the others and rethrows. */
async function startAll(count: number, start: () => Promise<RedisNode>): Promise<RedisNode[]> {
  const results = await Promise.allSettled(Array.from({ length: count }, start));
  const nodes = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) {
    await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
    throw failure.reason;
  }
  return nodes;
}

/**
 * Starts one redis-server (no persistence) on `opts.port` or a free port, with `extraArgs`
 * appended to its command line. Resolves once it answers PING; rejects within ~10 s with the
 * server's log tail. A fixed port that is taken is retried for ~5 s.
 */
export async function startRedisNode(
  opts: { port?: number; extraArgs?: string[] } = {},
): Promise<RedisNode> {
  const args = [...(opts.extraArgs ?? [])];
  return startNode(
    async () => ({ port: opts.port ?? (await findFreePort()), args }),
    opts.port !== undefined,
  );
}

/** Starts `n` independent nodes (e.g. for Redlock) in parallel. */
export async function startRedisNodes(n: number): Promise<RedisNode[]> {
  return startAll(n, () => startRedisNode());
}

/** Starts a cluster-enabled node; its bus port is a second free port (`--cluster-port`). */
function startClusterNode(): Promise<RedisNode> {
  return startNode(async (dir) => {
    const port = await findFreePort();
    let busPort = await findFreePort();
    while (busPort === port) busPort = await findFreePort();
    const args = [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, 'nodes.conf'),
      '--cluster-node-timeout',
      '2000',
      '--cluster-port',
      String(busPort),
    ];
    return { port, args };
  }, false);
}

function runRedisCli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: CLUSTER_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error) {
        reject(
          new Error(`redis-cli ${args.join(' ')} failed: ${error.message}\n${stdout}${stderr}`),
        );
      } else {
        resolve(stdout);
      }
    });
  });
}

/** Resolves once every node reports cluster_state:ok with all slots assigned and all peers known. */
async function waitForCluster(nodes: RedisNode[]): Promise<void> {
  const expected = [
    'cluster_state:ok',
    'cluster_slots_assigned:16384',
    `cluster_known_nodes:${nodes.length}`,
    `cluster_size:${nodes.length}`,
  ];
  const deadline = Date.now() + CLUSTER_TIMEOUT_MS;
  let last = '';
  for (;;) {
    const infos = await Promise.all(
      nodes.map((n) =>
        rawCommand(n.port, ['CLUSTER', 'INFO'], 1_000).catch((e: Error) => e.message),
      ),
    );
    const pending = infos.findIndex((info) =>
      expected.some((line) => !info.includes(`${line}\r\n`)),
    );
    if (pending < 0) return;
    last = `${nodes[pending].url}:\n${infos[pending]}`;
    if (Date.now() > deadline) {
      throw new Error(
        `Redis Cluster not ready within ${CLUSTER_TIMEOUT_MS / 1000} s; last CLUSTER INFO of ${last}`,
      );
    }
    await sleep(50);
  }
}

/**
 * Starts `masters` (>= 3, default 3) cluster-enabled nodes, joins them with
 * `redis-cli --cluster create ... --cluster-replicas 0`, and resolves once every node reports
 * cluster_state:ok with all 16384 slots assigned.
 */
export async function startRedisCluster(masters = 3): Promise<RedisClusterHandle> {
  if (!Number.isInteger(masters) || masters < 3) {
    throw new Error(`startRedisCluster: Redis Cluster needs at least 3 masters, got ${masters}`);
  }
  const nodes = await startAll(masters, startClusterNode);
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  try {
    await runRedisCli([
      '--cluster',
      'create',
      ...nodes.map((n) => `${HOST}:${n.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    await waitForCluster(nodes);
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, seeds: nodes.map((n) => n.url), stop };
}

/** Stops every node this process started and has not stopped yet (a safety net for afterAll). */
export async function stopAll(): Promise<void> {
  await Promise.all([...shared().nodes].map((n) => n.stop()));
}
