/**
 * Servers and probes for the Redis port contract: one redis-server or a 3-master Cluster that can
 * be taken down and brought back on the same ports (a Cluster with its slot assignment), a
 * recorder of a port's connection events, and a check that closing left no socket or timer.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { realProcess } from '../../servers/child-processes';
import {
  redisCommand,
  startRedisCluster,
  startRedisNode,
  type RedisNode,
} from '../../servers/redis-servers';
import type { ConnectionEvents, ConnectionPort } from '../../lib/backends/redis/port/redis-port';
import { eventually, sleep } from '../support/async';

/** The servers a contract run talks to. */
export interface PortServers {
  readonly cluster: boolean;
  readonly nodes: readonly RedisNode[];
  /** `redis://127.0.0.1:<port>`, one per node. */
  readonly urls: readonly string[];
  /** Sends `args` to every node over a fresh connection (raw RESP2 replies). */
  everyNode(...args: string[]): Promise<string[]>;
  /** Stops every node (refused from now on). */
  down(): Promise<void>;
  /**
   * Starts every node again on its port; a Cluster keeps its slots (its nodes.conf) and is
   * waited for until every node reports cluster_state:ok again.
   */
  up(): Promise<void>;
  /** Stops for good. */
  stop(): Promise<void>;
}

/** One redis-server, or a Cluster of three masters. */
export async function startPortServers(cluster: boolean): Promise<PortServers> {
  const nodes = cluster ? (await startRedisCluster(3)).nodes : [await startRedisNode()];
  let saved: string[] = [];
  return {
    cluster,
    nodes,
    urls: nodes.map((n) => n.url),
    everyNode: (...args) => Promise.all(nodes.map((n) => redisCommand(n.port, ...args))),
    async down() {
      // stop() removes a node's dir: keep what makes it the same Cluster member.
      saved = cluster ? nodes.map((n) => readFileSync(join(n.dir, 'nodes.conf'), 'utf8')) : [];
      await Promise.all(nodes.map((n) => n.stop()));
    },
    async up() {
      nodes.forEach((n, i) => {
        if (!cluster) return;
        mkdirSync(n.dir, { recursive: true });
        writeFileSync(join(n.dir, 'nodes.conf'), saved[i]);
      });
      await Promise.all(nodes.map((n) => n.restart()));
      if (!cluster) return;
      const ok = async (): Promise<boolean> =>
        (await Promise.all(nodes.map((n) => redisCommand(n.port, 'CLUSTER', 'INFO')))).every(
          (info) => info.includes('cluster_state:ok\r\n'),
        );
      const deadline = performance.now() + 20_000;
      while (!(await ok())) {
        if (performance.now() > deadline) throw new Error('the Cluster did not recover in 20 s');
        await sleep(50);
      }
    },
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/** One event a port reported, with whether the port said it was ready at that moment. */
export interface SeenEvent {
  readonly event: keyof ConnectionEvents;
  readonly ready: boolean;
  readonly err?: unknown;
}

/** Records a port's events in order; `stop()` unwatches. */
export class EventLog {
  readonly seen: SeenEvent[] = [];
  readonly stop: () => void;

  constructor(private readonly port: ConnectionPort) {
    const record =
      (event: keyof ConnectionEvents) =>
      (err?: unknown): void => {
        this.seen.push({ event, ready: port.isReady(), err });
      };
    this.stop = port.watch({
      ready: record('ready'),
      error: record('error'),
      closed: record('closed'),
      ended: record('ended'),
    });
  }

  /** Events seen from index `from` on. */
  since(from: number): SeenEvent[] {
    return this.seen.slice(from);
  }

  /** Waits until an `event` (that `matches`) is seen at or after index `from`; returns it. */
  async next(
    event: keyof ConnectionEvents,
    from: number,
    ms = 10_000,
    matches: (seen: SeenEvent) => boolean = () => true,
  ): Promise<SeenEvent> {
    const find = (): SeenEvent | undefined =>
      this.since(from).find((e) => e.event === event && matches(e));
    await eventually(
      () => find() !== undefined,
      ms,
      `'${event}' from ${this.port.endpoint} (seen: ${this.describe(from)})`,
    );
    return find()!;
  }

  describe(from = 0): string {
    return this.since(from)
      .map((e) => `${e.event}${e.ready ? '+ready' : ''}`)
      .join(', ');
  }
}

/** Sockets and timers this process holds now (Node's resource counts by type). */
export function openResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of realProcess().getActiveResourcesInfo()) {
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  return counts;
}

/**
 * Waits until the process holds no more sockets and timers than `before` (what it held before
 * the port was made): a closed port must leave nothing that keeps the process alive.
 */
export async function expectNothingLeftOpen(
  before: Map<string, number>,
  ms = 3_000,
): Promise<void> {
  const types = ['TCPSocketWrap', 'Timeout'];
  const extra = (): string[] =>
    types.flatMap((type) => {
      const more = (openResources().get(type) ?? 0) - (before.get(type) ?? 0);
      return more > 0 ? [`${more} ${type}`] : [];
    });
  try {
    await eventually(() => extra().length === 0, ms, 'the closed port to leave nothing open');
  } catch {
    throw new Error(`still open ${ms} ms after close(): ${extra().join(', ')}`);
  }
}
