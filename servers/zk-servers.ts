// Throwaway ZooKeeper servers for tests, chaos cells and benchmarks: a standalone node or a small
// ensemble, each node a JVM child process with its own zoo.cfg, data dir and free ports, never
// outliving the process that started it. Node built-ins only; needs the Debian package
// `zookeeper` (3.8.x) and `java` (scripts/ensure-services.sh). Talks to the servers with
// four-letter words over raw sockets.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  findFreePorts,
  HOST,
  listensOn,
  logTail,
  processWide,
  retryOnPortCollision,
  retryWhilePortTaken,
  ServerStartError,
  sleep,
  startServer,
  stopTracked,
  trackDir,
  type TrackedProcess,
  waitStopped,
} from './child-processes';

/** The Debian package's server jar; its manifest Class-Path pulls in jute, netty, slf4j-api... */
const ZK_JAR = '/usr/share/java/zookeeper.jar';
/** An slf4j binding, so that the server logs (to stderr, i.e. the node's log file). */
const SLF4J_SIMPLE_JAR = '/usr/share/java/slf4j-simple.jar';
const MAIN_CLASS = 'org.apache.zookeeper.server.quorum.QuorumPeerMain';
const JVM_OPTIONS = [
  '-Xms32m',
  '-Xmx192m',
  '-XX:+UseSerialGC',
  '-XX:TieredStopAtLevel=1', // C1 only: faster start, less CPU on small machines
  '-XX:-UsePerfData', // no /tmp/hsperfdata_* files left by killed JVMs
  '-Djava.net.preferIPv4Stack=true',
  '-Dorg.slf4j.simpleLogger.showDateTime=true',
  '-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS',
];

const DEFAULT_TICK_MS = 500;
const READY_TIMEOUT_MS = 30_000;
const REBIND_TIMEOUT_MS = 5_000;
const STOP_GRACE_MS = 5_000;
const START_ATTEMPTS = 3;
const FOUR_LETTER_TIMEOUT_MS = 2_000;
const MODE_TIMEOUT_MS = 1_000;

/** A node's role per `srvr`; `down` when it does not answer or does not serve. */
export type ZkMode = 'leader' | 'follower' | 'standalone' | 'down';
/** The four-letter words the nodes' zoo.cfg whitelists. */
export type FourLetterWord = 'ruok' | 'srvr' | 'stat' | 'mntr' | 'cons';

/** One ZooKeeper server (a JVM running QuorumPeerMain) on 127.0.0.1. */
export interface ZkNode {
  /** Server id: 1..n in an ensemble (its `myid`), 0 for a standalone node. */
  id: number;
  clientPort: number;
  /** `127.0.0.1:<clientPort>` */
  connectString: string;
  /** Node dir: `zoo.cfg`, `zookeeper.log`, `data/` (with `myid`). Kept by stop(). */
  dir: string;
  /** Kills the server (SIGTERM by default, even when paused) and waits for the exit. Keeps dir. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Starts the server again after stop(), on the same ports with the same data. Resolves once
   * it answers `ruok` and, when it can serve (standalone, or enough ensemble peers running for a
   * quorum), once `srvr` shows its mode. No-op while it runs.
   */
  start(): Promise<void>;
  /**
   * SIGSTOP: the server keeps its sockets but answers nothing (a GC pause, a hung host).
   * Resolves once every JVM thread has stopped.
   */
  pause(): Promise<void>;
  /** SIGCONT after pause(). */
  resume(): void;
  /** The server's pid while it runs (paused included). */
  pid(): number | undefined;
  /** Its `Mode:` per `srvr`; `down` when it does not answer in 1 s or is not serving. */
  mode(): Promise<ZkMode>;
  /** Stops the server (SIGKILL) and removes its dir; start() is not possible afterwards. */
  destroy(): Promise<void>;
}

/** A ZooKeeper ensemble of n voting nodes. */
export interface ZkEnsemble {
  nodes: ZkNode[];
  /** Every node's `127.0.0.1:<port>`, comma-separated, for a client's connect string. */
  connectString: string;
  /**
   * The leader, once exactly one running node reports `leader` and a quorum serves (polls for
   * up to `timeoutMs`, default 30 s; rejects with every node's mode).
   */
  leader(timeoutMs?: number): Promise<ZkNode>;
  /** Stops every node and removes the dirs. */
  stop(): Promise<void>;
}

/** Options of startZkStandalone() and startZkEnsemble(). */
export interface ZkOptions {
  /** ZooKeeper tickTime in ms (default 500: sessions of 1 s (2 ticks) to 60 s are allowed). */
  tickTime?: number;
}

// ---------------------------------------------------------------------------------------------
// Four-letter words.

/**
 * Sends a four-letter word over a fresh connection to 127.0.0.1:port and resolves with
 * everything the server writes before closing (`imok` for ruok). Rejects on connection errors
 * (`code: 'ECONNREFUSED'` when nothing listens) and with `code: 'ETIMEDOUT'` when the server
 * does not finish its answer within `timeoutMs` (default 2 s), e.g. while it is paused.
 */
export function zkFourLetter(
  port: number,
  word: FourLetterWord,
  timeoutMs = FOUR_LETTER_TIMEOUT_MS,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = createConnection({ host: HOST, port });
    const settle = (error: Error | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const timer = setTimeout(
      () =>
        settle(
          Object.assign(
            new Error(`no answer from 127.0.0.1:${port} to '${word}' within ${timeoutMs} ms`),
            { code: 'ETIMEDOUT' },
          ),
        ),
      timeoutMs,
    );
    socket.on('connect', () => socket.write(word));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => settle(null));
    socket.on('close', () => settle(null));
    socket.on('error', (error) => settle(error));
  });
}

/** The `Mode:` line of a `srvr` answer; `down` when there is none (e.g. not serving yet). */
function parseMode(srvr: string): ZkMode {
  const mode = /^Mode: (\S+)/m.exec(srvr)?.[1];
  return mode === 'leader' || mode === 'follower' || mode === 'standalone' ? mode : 'down';
}

// ---------------------------------------------------------------------------------------------
// Processes.

/** Every node not yet destroyed, for stopAllZk(): shared by every copy of this module. */
function liveNodes(): Set<ManagedZkNode> {
  return processWide('nestjs-distributed-lock/servers/zk-servers', () => new Set<ManagedZkNode>());
}

function classPath(): string {
  if (!existsSync(ZK_JAR)) {
    throw new ServerStartError(
      `${ZK_JAR} not found: install the Debian package zookeeper (scripts/ensure-services.sh)`,
      false,
    );
  }
  return [ZK_JAR, ...(existsSync(SLF4J_SIMPLE_JAR) ? [SLF4J_SIMPLE_JAR] : [])].join(':');
}

/** Ports of one node; quorum/election ports only in an ensemble. */
interface NodePorts {
  client: number;
  quorum?: number;
  election?: number;
}

/** Writes `zoo.cfg` (and `data/myid` in an ensemble) for node `id` of `all`. */
function writeConfig(dir: string, id: number, all: NodePorts[], tickTime: number): void {
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const ensemble = all.length > 1;
  const self = ensemble ? all[id - 1] : all[0];
  const lines = [
    '# written by servers/zk-servers.ts',
    `tickTime=${tickTime}`,
    `initLimit=${Math.max(5, Math.ceil(10_000 / tickTime))}`, // ~10 s for followers to sync
    `syncLimit=${Math.max(2, Math.ceil(3_000 / tickTime))}`, // ~3 s without the leader: re-elect
    `dataDir=${dataDir}`,
    `clientPortAddress=${HOST}`,
    `clientPort=${self.client}`,
    'maxClientCnxns=0',
    `minSessionTimeout=${2 * tickTime}`,
    `maxSessionTimeout=${Math.max(60_000, 20 * tickTime)}`,
    'admin.enableServer=false',
    '4lw.commands.whitelist=srvr,ruok,stat,mntr,cons',
    // Unknown keys become system properties zookeeper.<key>: no fsync (a killed process loses
    // nothing, only a machine crash would), 1 MB instead of 64 MB preallocated per log file.
    'forceSync=no',
    'preAllocSize=1024',
  ];
  if (ensemble) {
    all.forEach((p, i) => lines.push(`server.${i + 1}=${HOST}:${p.quorum}:${p.election}`));
    writeFileSync(join(dataDir, 'myid'), `${id}\n`);
  }
  writeFileSync(join(dir, 'zoo.cfg'), `${lines.join('\n')}\n`);
}

class ManagedZkNode implements ZkNode {
  readonly connectString: string;
  /** The ensemble's nodes (this one included); empty for a standalone node. */
  peers: ManagedZkNode[] = [];
  private running: TrackedProcess | undefined;
  private destroyed = false;

  constructor(
    readonly id: number,
    readonly clientPort: number,
    readonly dir: string,
  ) {
    this.connectString = `${HOST}:${clientPort}`;
    liveNodes().add(this);
  }

  get logFile(): string {
    return join(this.dir, 'zookeeper.log');
  }

  pid(): number | undefined {
    return this.running?.alive ? this.running.child.pid : undefined;
  }

  isRunning(): boolean {
    return this.running?.alive === true;
  }

  async mode(): Promise<ZkMode> {
    try {
      return parseMode(await zkFourLetter(this.clientPort, 'srvr', MODE_TIMEOUT_MS));
    } catch {
      return 'down';
    }
  }

  async pause(): Promise<void> {
    const running = this.running;
    if (!running?.alive || running.child.pid === undefined) return;
    running.child.kill('SIGSTOP');
    await waitStopped(running.child.pid);
  }

  resume(): void {
    if (this.running?.alive) this.running.child.kill('SIGCONT');
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (running) await stopTracked(running, signal, STOP_GRACE_MS, true);
  }

  async destroy(): Promise<void> {
    this.destroyed = true;
    await this.stop('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
    trackDir(this.dir, false);
    liveNodes().delete(this);
  }

  async start(): Promise<void> {
    if (this.destroyed) throw new Error(`ZooKeeper node ${this.id} was destroyed`);
    if (this.running?.alive) return;
    await retryWhilePortTaken(() => this.launch(() => this.canServe()), REBIND_TIMEOUT_MS, 200);
  }

  /** Standalone, or enough ensemble nodes running (this one included) to form a quorum. */
  private canServe(): boolean {
    if (this.peers.length === 0) return true;
    const running = this.peers.filter((p) => p === this || p.isRunning()).length;
    return running > this.peers.length / 2;
  }

  /**
   * Spawns the JVM and waits until it, and not some other process, answers `ruok` on the client
   * port and, while `waitServing()` holds, until `srvr` shows a mode.
   */
  async launch(waitServing: () => boolean): Promise<void> {
    let spawned: TrackedProcess | undefined;
    try {
      await startServer(
        'java',
        [...JVM_OPTIONS, '-cp', classPath(), MAIN_CLASS, join(this.dir, 'zoo.cfg')],
        {
          cwd: this.dir,
          logFile: this.logFile,
          comm: 'java',
          missingHint: 'is java installed? (see scripts/ensure-services.sh)',
          what: `ZooKeeper node ${this.id} (client port ${this.clientPort})`,
          timeoutMs: READY_TIMEOUT_MS,
          pollMs: 50,
          addressInUse: /Address already in use|BindException/i,
          // Set before it serves: ensemble peers starting meanwhile count it towards a quorum.
          onSpawn: (server) => (this.running = spawned = server),
          ready: async (pid) => {
            if (!(await this.answersAs(pid))) return 'last srvr: no answer yet';
            if (!waitServing()) return true;
            const srvr = await zkFourLetter(this.clientPort, 'srvr', MODE_TIMEOUT_MS).catch(
              (e: Error) => e.message,
            );
            return parseMode(srvr) !== 'down' || `last srvr: ${srvr.trim()}`;
          },
        },
      );
    } catch (error) {
      if (this.running === spawned) this.running = undefined;
      throw error;
    }
  }

  /** True when the client port answers `ruok` with `imok` and is held by process `pid`. */
  private async answersAs(pid: number): Promise<boolean> {
    try {
      if ((await zkFourLetter(this.clientPort, 'ruok', MODE_TIMEOUT_MS)) !== 'imok') return false;
      return listensOn(pid, this.clientPort);
    } catch {
      return false;
    }
  }
}

/** Makes the node dirs, writes their configs and starts them all; cleans up on failure. */
async function startNodes(
  size: number,
  tickTime: number,
  waitServing: boolean,
): Promise<ManagedZkNode[]> {
  if (!Number.isInteger(tickTime) || tickTime < 10) {
    throw new Error(`zk-servers: tickTime must be an integer >= 10 ms, got ${tickTime}`);
  }
  return retryOnPortCollision(START_ATTEMPTS, async () => {
    const ensemble = size > 1;
    const ports = await findFreePorts(ensemble ? 3 * size : 1);
    const plan: NodePorts[] = Array.from({ length: size }, (_, i) =>
      ensemble
        ? { client: ports[3 * i], quorum: ports[3 * i + 1], election: ports[3 * i + 2] }
        : { client: ports[0] },
    );
    const nodes = plan.map((p, i) => {
      const dir = mkdtempSync(join(tmpdir(), ensemble ? `zk-node${i + 1}-` : 'zk-node-'));
      trackDir(dir, true);
      writeConfig(dir, ensemble ? i + 1 : 0, plan, tickTime);
      return new ManagedZkNode(ensemble ? i + 1 : 0, p.client, dir);
    });
    if (ensemble) for (const node of nodes) node.peers = nodes;
    const results = await Promise.allSettled(nodes.map((n) => n.launch(() => waitServing)));
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (!failure) return nodes;
    await Promise.all(nodes.map((n) => n.destroy()));
    throw failure.reason;
  });
}

/**
 * Starts one standalone ZooKeeper server on a free port. Resolves once it answers `ruok` and
 * `srvr` shows `Mode: standalone`; rejects within ~30 s with the server's log tail.
 */
export async function startZkStandalone(opts: ZkOptions = {}): Promise<ZkNode> {
  const [node] = await startNodes(1, opts.tickTime ?? DEFAULT_TICK_MS, true);
  return node;
}

/** Polls the nodes' modes until exactly one leads and a quorum serves. */
async function waitForLeader(nodes: ManagedZkNode[], timeoutMs: number): Promise<ManagedZkNode> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const modes = await Promise.all(nodes.map((n) => n.mode()));
    const leaders = nodes.filter((_, i) => modes[i] === 'leader');
    const serving = modes.filter((m) => m === 'leader' || m === 'follower').length;
    if (leaders.length === 1 && serving > nodes.length / 2) return leaders[0];
    if (Date.now() > deadline) {
      const report = nodes.map((n, i) => `${n.id}:${n.clientPort}=${modes[i]}`).join(', ');
      throw new Error(`ZooKeeper ensemble has no single leader after ${timeoutMs} ms: ${report}`);
    }
    await sleep(50);
  }
}

/**
 * Starts an ensemble of `size` (default 3) nodes on free ports, in parallel. Resolves once every
 * node serves (leader or follower) with exactly one leader; rejects within ~30 s with the log
 * tail of the node that failed, after stopping the others.
 */
export async function startZkEnsemble(size = 3, opts: ZkOptions = {}): Promise<ZkEnsemble> {
  if (!Number.isInteger(size) || size < 2) {
    throw new Error(`startZkEnsemble: an ensemble needs at least 2 nodes, got ${size}`);
  }
  const nodes = await startNodes(size, opts.tickTime ?? DEFAULT_TICK_MS, false);
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.destroy()));
  };
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      await waitForLeader(nodes, Math.max(0, deadline - Date.now()));
      const modes = await Promise.all(nodes.map((n) => n.mode()));
      if (modes.every((m) => m === 'leader' || m === 'follower')) break;
      if (Date.now() > deadline) {
        throw new Error(`ZooKeeper ensemble not fully up: ${modes.join(', ')}`);
      }
      await sleep(50);
    }
  } catch (error) {
    const tails = nodes.map((n) => `node ${n.id}:\n${logTail(n.logFile, 0, 10)}`).join('\n');
    await stop();
    throw new Error(`${(error as Error).message}\nLog tails:\n${tails}`);
  }
  return {
    nodes,
    connectString: nodes.map((n) => n.connectString).join(','),
    leader: (timeoutMs = READY_TIMEOUT_MS) => waitForLeader(nodes, timeoutMs),
    stop,
  };
}

/** Destroys every node this process started and has not destroyed yet (for afterAll). */
export async function stopAllZk(): Promise<void> {
  await Promise.all([...liveNodes()].map((n) => n.destroy()));
}
