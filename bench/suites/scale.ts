import { randomUUID } from 'node:crypto';
import { dropTable, uniqueTableName } from '../../servers/databases';
import { startRedisNode, type RedisNode } from '../../servers/redis-servers';
import { startZkStandalone, stopAllZk, type ZkNode } from '../../servers/zk-servers';
import { runDistinctKeys, SETTLE_MS, type DistinctKeysResult } from '../harness/distinct-keys';
import { HELD_TTL_MS, runHeld, type HeldResult } from '../harness/held';
import type { Profile } from '../harness/profile';
import {
  fmt,
  target,
  type BenchTable,
  type ChartSpec,
  type SuiteResult,
  type TargetCheck,
} from '../harness/result';
import { STORE_LABELS, type ScaleStore } from '../harness/scale-store';
import { probeStore, type StoreProbe } from '../harness/store-probe';
import { runWaiters, WAITER_HOLD_MS, type WaitersResult } from '../harness/waiters';

/** The suite's servers: a Redis node and a ZooKeeper server of its own, so their counts are its. */
interface Servers {
  redis: RedisNode;
  zk: ZkNode;
}

/** "1k", "100k", or the number itself below 1,000. */
function size(n: number): string {
  return n >= 1_000 && n % 1_000 === 0 ? `${n / 1_000}k` : String(n);
}

/** A fresh namespace for one run: its own key prefix, table or ZooKeeper root. */
function freshStore(kind: ScaleStore['kind'], servers: Servers): ScaleStore {
  switch (kind) {
    case 'memory':
      return { kind };
    case 'redis':
      return { kind, url: servers.redis.url };
    case 'postgres':
      return { kind, table: uniqueTableName('bench_scale') };
    case 'zookeeper':
      return {
        kind,
        connect: servers.zk.connectString,
        root: `/scale-${randomUUID().slice(0, 8)}`,
      };
  }
}

/** Runs `work` on a fresh namespace of `kind` with its probe, and drops the table after. */
async function onFreshStore<T>(
  kind: ScaleStore['kind'],
  servers: Servers,
  work: (store: ScaleStore, probe: StoreProbe, prefix: string) => Promise<T>,
): Promise<T> {
  const store = freshStore(kind, servers);
  const prefix = `scale:${randomUUID().slice(0, 8)}:`;
  const probe = await probeStore(store);
  try {
    return await work(store, probe, prefix);
  } finally {
    await probe.close();
    if (store.kind === 'postgres') await dropTable('postgres', store.table);
  }
}

/**
 * Issue 18, item 5: how the cost grows with the work. Held locks (1k to 100k at once, ttl 3 s,
 * autoRenew: store calls/s, the holder's CPU, heap per lock), waiters on one key (1 to 1,000:
 * throughput, waits, fairness) and distinct keys (1k and 100k, each locked once: what the
 * store keeps afterwards). On a Redis node and a ZooKeeper server the suite starts (their
 * counters and key counts are then this run's alone), a PostgreSQL table of its own per run,
 * and memory as the engine-only baseline.
 */
export async function scaleSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const { scale } = profile;
  const redis = await startRedisNode();
  try {
    const zk = await startZkStandalone();
    const servers: Servers = { redis, zk };
    try {
      const held: HeldResult[] = [];
      for (const [kind, sizes] of [
        ['memory', scale.held],
        ['redis', scale.held],
        ['postgres', scale.heldSql],
      ] as const) {
        for (const n of sizes) {
          held.push(
            await onFreshStore(kind, servers, (_, probe, prefix) =>
              runHeld(probe, n, scale.heldWindowMs, prefix),
            ),
          );
          log(`held ${kind} ${size(n)}`, held[held.length - 1]);
        }
      }
      const waiters: WaitersResult[] = [];
      for (const kind of ['memory', 'redis', 'zookeeper'] as const) {
        for (const n of scale.waiters) {
          waiters.push(
            await onFreshStore(kind, servers, (store) => runWaiters(store, n, scale.waitersMs)),
          );
          log(`waiters ${kind} ${n}`, waiters[waiters.length - 1]);
        }
      }
      const keys: DistinctKeysResult[] = [];
      for (const kind of ['redis', 'postgres', 'zookeeper'] as const) {
        for (const n of scale.keys) {
          keys.push(
            await onFreshStore(kind, servers, (store, probe, prefix) =>
              runDistinctKeys(store, n, probe, prefix),
            ),
          );
          log(`keys ${kind} ${size(n)}`, keys[keys.length - 1]);
        }
      }
      return {
        id: 'scale',
        title: 'Scale: held locks, waiters on one key, distinct keys',
        tables: [
          heldTable(held, scale.heldWindowMs),
          waitersTable(waiters, scale.waitersMs),
          keysTable(keys),
        ],
        targets: heldTargets(held),
        charts: charts(held, waiters, keys),
        data: {
          ttlMs: HELD_TTL_MS,
          heldWindowMs: scale.heldWindowMs,
          waiterHoldMs: WAITER_HOLD_MS,
          waitersMs: scale.waitersMs,
          settleMs: SETTLE_MS,
          held,
          waiters,
          keys,
        },
        seconds: (performance.now() - started) / 1000,
      };
    } finally {
      await stopAllZk();
    }
  } finally {
    await redis.stop();
  }
}

function log(what: string, result: object): void {
  console.log(`  ${what}: ${JSON.stringify(result)}`);
}

function heldTable(results: readonly HeldResult[], windowMs: number): BenchTable {
  return {
    title: `Held locks (ttl ${HELD_TTL_MS / 1000} s, autoRenew): steady ${windowMs / 1000} s window after all are held`,
    columns: [
      'Store',
      'held locks',
      'store calls/s',
      'Redis commands run/s',
      'client CPU (% of a core)',
      'heap per lock (bytes)',
      'acquire all (s)',
      'lost / not acquired',
    ],
    rows: results.map((r) => [
      STORE_LABELS[r.store],
      size(r.n),
      r.storeCallsPerSec === null ? '—' : fmt(r.storeCallsPerSec),
      r.redisCommandsPerSec === null ? '—' : fmt(r.redisCommandsPerSec),
      fmt(r.cpuPercent),
      fmt(r.heapPerLockBytes),
      fmt(r.acquireMs / 1000),
      `${r.lost} / ${r.notAcquired}`,
    ]),
    note:
      'The holder is a process of its own that takes the locks and then sits still, so its CPU ' +
      '(process.cpuUsage, user + system, over the window) is what holding them costs. Store calls: ' +
      'on Redis the requests the client sent (counted on the wire by a proxy in front of the ' +
      'suite’s own node: a script call is one), on PostgreSQL the statements it sent (a TypeORM ' +
      'logger counting them); memory has no store (—). Redis commands run: the node’s INFO ' +
      'total_commands_processed, which also counts each command a script runs. Heap per lock: heapUsed after a forced GC with ' +
      'all held, less heapUsed before the first, over the number held (the handles the holder ' +
      'keeps included; on memory the store’s own entries too). The window starts a third of the ' +
      'ttl after the last grant, when renewals run at their steady pace. Lost: locks lost ' +
      'between their grant and the window’s end; not acquired: acquisitions that timed out ' +
      '(the store did not keep up); the figures only count when both are 0. Heap per lock is ' +
      'over the locks acquired.',
  };
}

function waitersTable(results: readonly WaitersResult[], durationMs: number): BenchTable {
  return {
    title: `Waiters on one key: each takes it, holds ${WAITER_HOLD_MS} ms, releases and asks again at once`,
    columns: [
      'Store',
      'waiters (processes)',
      'locked ops/s',
      'wait p50 / p99 / max (ms)',
      'sections per waiter (min–max)',
      'Jain’s fairness',
    ],
    rows: results.map((r) => [
      STORE_LABELS[r.store],
      `${fmt(r.waiters)} (${r.processes})`,
      fmt(r.opsPerSec),
      `${fmt(r.waitMs.p50)} / ${fmt(r.waitMs.p99)} / ${fmt(r.waitMs.max)}`,
      `${r.minPerWaiter}–${r.maxPerWaiter}`,
      fmt(r.jain, 3),
    ]),
    note:
      `One run of ${durationMs / 1000} s per cell, the first 10% left out as ramp-up. Waiters are ` +
      'spread over up to 4 processes (memory: one, its locks live in one process) with one ' +
      'LockService each. Jain’s index over sections per waiter: 1 when every waiter got the same ' +
      'share, 1/n when one took all. The merged timeline is also checked for two holders at once.',
  };
}

function keysTable(results: readonly DistinctKeysResult[]): BenchTable {
  const unit: Record<ScaleStore['kind'], string> = {
    memory: '—',
    redis: 'keys',
    postgres: 'rows',
    zookeeper: 'znodes',
  };
  return {
    title: 'Distinct keys, each locked and released once: what the store keeps',
    columns: [
      'Store',
      'keys',
      'counted',
      'before',
      'after the last release',
      `${SETTLE_MS / 1000} s later`,
      'left per key',
      'cycles/s',
    ],
    rows: results.map((r) => [
      STORE_LABELS[r.store],
      size(r.n),
      unit[r.store],
      fmt(r.before),
      fmt(r.after),
      fmt(r.settled),
      fmt((r.settled - r.before) / r.n),
      fmt(r.cyclesPerSec),
    ]),
    note:
      'Acquire + release of each key once, 32 in flight, on a fresh namespace: every key on the ' +
      'suite’s own Redis node, emptied before the run (DBSIZE: the shared fence counters, at most ' +
      '4,096, count too), rows of the run’s own lock table (fence bucket rows included), znodes ' +
      'under the run’s own lock root ' +
      `(the server’s znode count less its count before). "${SETTLE_MS / 1000} s later": with the ` +
      'module still running, past the ZooKeeper backend’s 2 s delay before it removes an emptied ' +
      'key node.',
  };
}

/** The targets for held locks on Redis, for the sizes this profile measured. */
function heldTargets(results: readonly HeldResult[]): TargetCheck[] {
  const redis = (n: number): HeldResult | undefined =>
    results.find((r) => r.store === 'redis' && r.n === n);
  // A lost or unacquired lock voids the figures: the target then reads n/a and is missed.
  const figure = (r: HeldResult, value: number): number =>
    r.lost === 0 && r.notAcquired === 0 ? value : NaN;
  const targets: TargetCheck[] = [];
  const tenK = redis(10_000);
  if (tenK) {
    targets.push(
      target(
        'scale-held-10k-calls',
        'Scale: 10k locks held on Redis: store calls/s',
        figure(tenK, tenK.storeCallsPerSec ?? NaN),
        '<=',
        100,
        'calls/s',
      ),
      target(
        'scale-held-10k-cpu',
        'Scale: 10k locks held on Redis: client CPU, % of a core',
        figure(tenK, tenK.cpuPercent),
        '<=',
        5,
        '%',
      ),
    );
  }
  const hundredK = redis(100_000);
  if (hundredK) {
    targets.push(
      target(
        'scale-held-100k-cpu',
        'Scale: 100k locks held on Redis: client CPU, % of a core',
        figure(hundredK, hundredK.cpuPercent),
        '<=',
        25,
        '%',
      ),
      target(
        'scale-held-100k-heap',
        'Scale: 100k locks held on Redis: heap per lock',
        figure(hundredK, hundredK.heapPerLockBytes),
        '<=',
        1_024,
        'B',
      ),
    );
  }
  return targets;
}

function charts(
  held: readonly HeldResult[],
  waiters: readonly WaitersResult[],
  keys: readonly DistinctKeysResult[],
): ChartSpec[] {
  // A run that lost locks measured fewer than it names: left out of the lines (the table has it).
  const heldPoints = (value: (r: HeldResult) => number | null) =>
    held
      .filter((r) => value(r) !== null && r.lost === 0 && r.notAcquired === 0)
      .map((r) => ({
        label: size(r.n),
        group: STORE_LABELS[r.store],
        x: r.n,
        value: round(value(r) ?? NaN),
      }));
  const heldAxis = { xTitle: 'locks held at once' };
  const waiterPoints = (value: (r: WaitersResult) => number) =>
    waiters.map((r) => ({
      label: String(r.waiters),
      group: STORE_LABELS[r.store],
      x: r.waiters,
      value: round(value(r)),
    }));
  return [
    {
      id: 'scale-held-cpu',
      title: 'Holding locks: client CPU (% of a core; runs that lost locks left out)',
      valueTitle: '% of a core',
      points: heldPoints((r) => r.cpuPercent),
      growth: { ...heldAxis, logValues: true },
    },
    {
      id: 'scale-held-calls',
      title: 'Holding locks: store calls/s (runs that lost locks left out)',
      valueTitle: 'store calls/s',
      points: heldPoints((r) => r.storeCallsPerSec),
      growth: { ...heldAxis, logValues: true },
    },
    {
      id: 'scale-held-heap',
      title: 'Holding locks: heap per lock, bytes (runs that lost locks left out)',
      valueTitle: 'bytes per lock',
      points: heldPoints((r) => r.heapPerLockBytes),
      growth: heldAxis,
    },
    {
      id: 'scale-waiters-throughput',
      title: 'Waiters on one key: locked ops/s',
      valueTitle: 'locked ops/s',
      points: waiterPoints((r) => r.opsPerSec),
      growth: { xTitle: 'concurrent waiters', logValues: true },
    },
    {
      id: 'scale-waiters-p99',
      title: 'Waiters on one key: p99 wait (ms)',
      valueTitle: 'p99 wait (ms)',
      points: waiterPoints((r) => r.waitMs.p99),
      growth: { xTitle: 'concurrent waiters', logValues: true },
    },
    {
      id: 'scale-keys-footprint',
      title: `Distinct keys locked once: store footprint ${SETTLE_MS / 1000} s later`,
      valueTitle: 'keys / rows / znodes left',
      points: keys.map((r) => ({
        label: size(r.n),
        group: STORE_LABELS[r.store],
        x: r.n,
        value: r.settled - r.before,
      })),
      growth: { xTitle: 'distinct keys', logValues: true },
    },
  ];
}

/** Three significant digits for a chart label (integers above 100). */
function round(value: number): number {
  return Math.abs(value) >= 100 ? Math.round(value) : Number(value.toPrecision(3));
}
