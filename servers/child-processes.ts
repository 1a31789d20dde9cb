// What the server harnesses (redis-servers.ts, zk-servers.ts) share: free ports, log tails, the
// start-up wait and retries, and the bookkeeping that makes sure a server child process never
// outlives the process that started it. Node built-ins only. Jest notes: every test file gets its
// own copy of this module and of `process` (whose 'exit' event never fires), so process-wide
// state lives on the real process object, reached through the main V8 context.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { runInThisContext } from 'node:vm';

/** Where every harness server listens: loopback only, never reachable from outside. */
export const HOST = '127.0.0.1' as const;

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The Node process itself, not Jest's per-file copy of it. */
export function realProcess(): NodeJS.Process {
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

/**
 * One value per Node process, shared by every copy of the calling module (Jest loads one per
 * test file): kept on the real process object under `Symbol.for(key)`, created on first use.
 */
export function processWide<T extends object>(key: string, create: () => T): T {
  const slot = realProcess() as unknown as Record<symbol, T | undefined>;
  const symbol = Symbol.for(key);
  const existing = slot[symbol];
  if (existing) return existing;
  const value = create();
  slot[symbol] = value;
  return value;
}

// ---------------------------------------------------------------------------------------------
// Children and dirs that must not outlive this process.

interface Bookkeeping {
  /** Server children still running. */
  children: Set<ChildProcess>;
  /** Node dirs not yet removed. */
  dirs: Set<string>;
  /** Kills registered pids when this process dies, however it dies (see WATCHDOG_SOURCE). */
  watchdog?: ChildProcess;
}

function bookkeeping(): Bookkeeping {
  return processWide('nestjs-distributed-lock/servers/child-processes', () => {
    const state: Bookkeeping = { children: new Set(), dirs: new Set() };
    realProcess().on('exit', () => {
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
  });
}

// A tiny Node process reading "+pid N COMM" / "-pid N" / "+dir D" / "-dir D" lines on stdin. Its
// stdin closes when this process dies, even by SIGKILL or when Jest force-kills a worker (neither
// runs 'exit' handlers); it then SIGKILLs the pids still registered (checking /proc that each
// still runs the command it was registered with, e.g. `redis-server` or `java`, so a recycled pid
// is spared) and removes the dirs. SIGKILL also ends a SIGSTOPped child.
const WATCHDOG_SOURCE = `
const fs = require('fs');
const pids = new Map();
const dirs = new Set();
let buf = '';
for (const s of ['SIGINT', 'SIGHUP']) process.on(s, () => {});
const stillRuns = (pid, comm) => {
  if (!fs.existsSync('/proc/self/comm')) return true;
  try { return fs.readFileSync('/proc/' + pid + '/comm', 'utf8').startsWith(comm); }
  catch { return false; }
};
const finish = () => {
  for (const [pid, comm] of pids) {
    if (stillRuns(pid, comm)) { try { process.kill(pid, 'SIGKILL'); } catch {} }
  }
  for (const dir of dirs) { try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 }); } catch {} }
  process.exit(0);
};
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  const lines = (buf + d).split('\\n');
  buf = lines.pop();
  for (const line of lines) {
    const m = /^([+-])(pid|dir) (.+)$/.exec(line);
    if (!m) continue;
    if (m[2] === 'dir') { if (m[1] === '+') dirs.add(m[3]); else dirs.delete(m[3]); continue; }
    const [pid, comm = ''] = m[3].split(' ');
    if (m[1] === '+') pids.set(Number(pid), comm); else pids.delete(Number(pid));
  }
});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
`;

/** Sends one line to the watchdog, starting it first if it is not running. */
function watchdogSay(line: string): void {
  const state = bookkeeping();
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
  state.watchdog.stdin?.write(`${line}\n`);
}

/** Registers (or forgets) a node dir, removed at exit (or by the watchdog) if still there. */
export function trackDir(dir: string, track: boolean): void {
  const state = bookkeeping();
  if (track) state.dirs.add(dir);
  else state.dirs.delete(dir);
  watchdogSay(`${track ? '+' : '-'}dir ${dir}`);
}

/** A server child process started by spawnTracked(). */
export interface TrackedProcess {
  child: ChildProcess;
  /** Resolves once the process has exited (or failed to spawn). */
  exited: Promise<void>;
  alive: boolean;
  /** How it ended, once it has. */
  outcome?: string;
}

/**
 * Spawns `command` in `cwd` with stdout and stderr appended to `logFile`, unref'd (a forgotten
 * server never keeps the test process alive) and registered so that it is SIGKILLed when this
 * process exits or dies. `comm` is the process name /proc shows for it (`redis-server`, `java`);
 * `missingHint` is appended to the outcome when the command cannot be spawned.
 */
export function spawnTracked(
  command: string,
  args: readonly string[],
  opts: { cwd: string; logFile: string; comm: string; missingHint: string },
): TrackedProcess {
  const state = bookkeeping();
  const fd = openSync(opts.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { cwd: opts.cwd, stdio: ['ignore', fd, fd], detached: false });
  } finally {
    closeSync(fd); // the child has its own copy
  }
  child.unref();
  const pid = child.pid;
  let markExited: () => void = () => undefined;
  const tracked: TrackedProcess = {
    child,
    alive: true,
    exited: new Promise<void>((resolve) => (markExited = resolve)),
  };
  const done = (outcome: string): void => {
    if (!tracked.alive) return;
    tracked.alive = false;
    tracked.outcome = outcome;
    state.children.delete(child);
    if (pid !== undefined) watchdogSay(`-pid ${pid}`);
    markExited();
  };
  child.once('exit', (code, signal) => done(signal ? `killed by ${signal}` : `exit code ${code}`));
  child.once('error', (error) => done(`${error.message}: ${opts.missingHint}`));
  if (pid !== undefined) {
    state.children.add(child);
    watchdogSay(`+pid ${pid} ${opts.comm}`);
  }
  return tracked;
}

/**
 * Sends `signal` and waits for the exit, escalating to SIGKILL after `graceMs`. With `resume`,
 * also sends SIGCONT so that a SIGSTOPped process gets to handle the signal.
 */
export async function stopTracked(
  tracked: TrackedProcess,
  signal: NodeJS.Signals,
  graceMs: number,
  resume = false,
): Promise<void> {
  if (!tracked.alive) return;
  tracked.child.ref(); // keep the event loop alive until the exit is seen
  tracked.child.kill(signal);
  if (resume && signal !== 'SIGKILL') tracked.child.kill('SIGCONT');
  const force = setTimeout(() => tracked.child.kill('SIGKILL'), graceMs);
  await tracked.exited;
  clearTimeout(force);
}

/**
 * Resolves once every thread of `pid` is stopped (state `T` or `t` in /proc), or rejects after
 * `timeoutMs`. kill(SIGSTOP) only queues the signal: the thread chosen to take it must run to
 * start the group stop, and until then the other threads go on. A JVM's launcher thread takes it
 * while the server's own threads keep answering, so on a loaded machine a "paused" ZooKeeper
 * still answered a request sent right after the kill.
 */
export async function waitStopped(pid: number, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      throw new Error(`process ${pid} is gone: it cannot be stopped`);
    }
    const running = tasks.filter((tid) => !/^[tT]$/.test(threadState(pid, tid)));
    if (running.length === 0) return;
    if (Date.now() > deadline) {
      throw new Error(
        `process ${pid}: ${running.length} threads still run ${timeoutMs} ms after SIGSTOP`,
      );
    }
    await sleep(2);
  }
}

/** The one-letter state of a thread from /proc/<pid>/task/<tid>/stat ('' once it is gone). */
function threadState(pid: number, tid: string): string {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // The command name, in parentheses, may hold spaces: the state follows its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return 'T'; // a thread that exited meanwhile runs nothing
  }
}

// ---------------------------------------------------------------------------------------------
// Starting up.

/** How long a SIGKILLed server that has not exited yet waits for another SIGKILL. */
const KILL_GRACE_MS = 5_000;

/** A server failing to start; `addressInUse` when it could not bind its port(s). */
export class ServerStartError extends Error {
  constructor(
    message: string,
    readonly addressInUse: boolean,
  ) {
    super(message);
    this.name = 'ServerStartError';
  }
}

/** True for a start that failed only because a port was taken: worth another try. */
function addressWasInUse(error: unknown): boolean {
  return error instanceof ServerStartError && error.addressInUse;
}

/**
 * Spawns a server (see spawnTracked; its log from this start on is what error messages quote)
 * and waits until `ready(pid)` says it serves, asking every `pollMs`. `onSpawn` sees the process
 * before the wait. Rejects with a ServerStartError carrying the log tail: when the process exits
 * (`addressInUse` when the tail matches `addressInUse`), or after `timeoutMs`, having SIGKILLed
 * it; `ready` returns true, or else what it saw, for that message.
 */
export async function startServer(
  command: string,
  args: readonly string[],
  opts: {
    cwd: string;
    logFile: string;
    comm: string;
    missingHint: string;
    /** Names the server in error messages, e.g. `redis-server on port 1234`. */
    what: string;
    timeoutMs: number;
    pollMs: number;
    addressInUse: RegExp;
    ready: (pid: number) => Promise<true | string>;
    onSpawn?: (server: TrackedProcess) => void;
  },
): Promise<TrackedProcess> {
  const logFrom = fileSize(opts.logFile);
  const server = spawnTracked(command, args, opts);
  opts.onSpawn?.(server);
  const pid = server.child.pid;
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    if (!server.alive) {
      const tail = logTail(opts.logFile, logFrom);
      throw new ServerStartError(
        `${opts.what} failed to start (${server.outcome}). Log tail:\n${tail}`,
        opts.addressInUse.test(tail),
      );
    }
    // No pid: the spawn failed, and the 'error' event that ends it is on its way.
    const seen = pid === undefined ? 'not spawned' : await opts.ready(pid);
    if (seen === true) return server;
    if (Date.now() > deadline) {
      await stopTracked(server, 'SIGKILL', KILL_GRACE_MS);
      throw new ServerStartError(
        `${opts.what} not ready within ${opts.timeoutMs / 1000} s (${seen}). ` +
          `Log tail:\n${logTail(opts.logFile, logFrom)}`,
        false,
      );
    }
    await sleep(opts.pollMs);
  }
}

/**
 * Runs `start` again, every `pauseMs`, while it fails because its fixed port is still taken (the
 * previous process's socket, a port another test grabbed meanwhile), for up to `timeoutMs`.
 */
export async function retryWhilePortTaken<T>(
  start: () => Promise<T>,
  timeoutMs: number,
  pauseMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await start();
    } catch (error) {
      if (!addressWasInUse(error) || Date.now() > deadline) throw error;
      await sleep(pauseMs);
    }
  }
}

/**
 * Runs `attempt` up to `attempts` times while it fails because a port was taken: a free port can
 * be grabbed by someone else between findFreePort() and the server's bind, so each attempt
 * chooses its ports afresh.
 */
export async function retryOnPortCollision<T>(
  attempts: number,
  attempt: () => Promise<T>,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (error) {
      if (!addressWasInUse(error) || n >= attempts) throw error;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Logs.

/** The last `lines` lines of `file` from byte `from` on, for error messages. */
export function logTail(file: string, from: number, lines = 20): string {
  try {
    const text = readFileSync(file).subarray(from).toString('utf8').trimEnd();
    return text ? text.split('\n').slice(-lines).join('\n') : '(log empty)';
  } catch {
    return '(no log)';
  }
}

/** Size of `file` in bytes, 0 when missing. */
export function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
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

/** `count` distinct ports, each free right now. */
export async function findFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await findFreePort());
  return [...ports];
}

/** Inodes of the sockets listening on TCP `port` (IPv4 and IPv6), or undefined without /proc. */
function listeningInodes(port: number): Set<string> | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  let readable = false;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
      readable = true;
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A') continue; // 0A: LISTEN
      if (fields[1].endsWith(`:${hexPort}`)) inodes.add(fields[9]);
    }
  }
  return readable ? inodes : undefined;
}

/**
 * True when process `pid` holds the socket listening on TCP `port`, so that an answer on the
 * port comes from it and not from some other process. True as well when /proc cannot tell.
 */
export function listensOn(pid: number, port: number): boolean {
  const inodes = listeningInodes(port);
  if (inodes === undefined) return true;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match && inodes.has(match[1])) return true;
    } catch {
      // fd closed meanwhile
    }
  }
  return false;
}
