// Throwaway redis-server processes for tests, chaos cells and benchmarks: single nodes (Redlock,
// restarts) and small Redis Clusters, each on its own port and temp dir, never outliving the
// process that started them. Node built-ins only; needs `redis-server` and `redis-cli` on PATH
// (scripts/ensure-services.sh).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  findFreePort,
  HOST,
  processWide,
  retryOnPortCollision,
  retryWhilePortTaken,
  sleep,
  startServer,
  stopTracked,
  trackDir,
  type TrackedProcess,
} from './child-processes';

// Re-exported: specs probe a port nothing listens on with it.
export { findFreePort } from './child-processes';

/**
 * The machine's own Redis, which scripts/ensure-services.sh makes sure answers (`REDIS_URL`
 * overrides): for tests and benchmarks that need no server of their own to stop or restart.
 */
export const MACHINE_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

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
  /**
   * Stop with `signal` (default SIGTERM; SIGKILL for a crash) and start again on the same port
   * with the same args and dir (empty data unless the args turn persistence on).
   */
  restart(signal?: NodeJS.Signals): Promise<void>;
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

/** Every node not yet stopped, for stopAll(): shared by every copy of this module in the process. */
function liveNodes(): Set<RedisNode> {
  return processWide('nestjs-distributed-lock/servers/redis-servers', () => new Set<RedisNode>());
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
// Processes.

/** Spawns redis-server once and waits until it, and not some other process, answers PING. */
function launch(port: number, args: readonly string[], dir: string): Promise<TrackedProcess> {
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
  return startServer('redis-server', argv, {
    cwd: dir,
    logFile: join(dir, 'redis.log'),
    comm: 'redis-server',
    missingHint: 'is the Debian package redis-server installed? (see scripts/ensure-services.sh)',
    what: `redis-server on port ${port}`,
    timeoutMs: READY_TIMEOUT_MS,
    pollMs: 20,
    addressInUse: /Address already in use/i,
    ready: async (pid) => (await answersAs(port, pid)) || 'no answer to PING from it',
  });
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
function launchOnFixedPort(
  port: number,
  args: readonly string[],
  dir: string,
): Promise<TrackedProcess> {
  return retryWhilePortTaken(() => launch(port, args, dir), REBIND_TIMEOUT_MS, 100);
}

interface Plan {
  port: number;
  args: string[];
}

class ManagedRedisNode implements RedisNode {
  readonly host = HOST;
  readonly url: string;
  private running: TrackedProcess | undefined;

  constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: readonly string[],
    running: TrackedProcess,
  ) {
    this.url = `redis://${HOST}:${port}`;
    this.running = running;
    liveNodes().add(this);
  }

  pid(): number | undefined {
    return this.running?.alive ? this.running.child.pid : undefined;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.kill(signal);
    rmSync(this.dir, { recursive: true, force: true });
    trackDir(this.dir, false);
    liveNodes().delete(this);
  }

  async restart(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.kill(signal);
    mkdirSync(this.dir, { recursive: true }); // after stop() the dir is gone: start afresh
    trackDir(this.dir, true);
    liveNodes().add(this);
    this.running = await launchOnFixedPort(this.port, this.args, this.dir);
  }

  private async kill(signal: NodeJS.Signals): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (running) await stopTracked(running, signal, STOP_GRACE_MS);
  }
}

/** Makes a node dir and starts a server in it, choosing a new plan after a port collision. */
async function startNode(
  plan: (dir: string) => Promise<Plan>,
  fixedPort: boolean,
): Promise<RedisNode> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-node-'));
  trackDir(dir, true);
  const attempt = async (): Promise<RedisNode> => {
    const { port, args } = await plan(dir);
    const running = fixedPort
      ? await launchOnFixedPort(port, args, dir)
      : await launch(port, args, dir);
    return new ManagedRedisNode(port, dir, args, running);
  };
  try {
    // A fixed port is the caller's choice: waited for, never swapped for another.
    return fixedPort ? await attempt() : await retryOnPortCollision(START_ATTEMPTS, attempt);
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
  await Promise.all([...liveNodes()].map((n) => n.stop()));
}
