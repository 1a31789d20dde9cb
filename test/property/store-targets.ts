/**
 * Every real backend configuration the bad-input properties run on: the machine's Redis, a
 * Redis Cluster and three Redlock nodes of their own, a standalone ZooKeeper, and the typeorm
 * strategies on PostgreSQL, MariaDB and SQLite. Each run is namespaced by its own key prefix
 * (and table); servers of its own are stopped, tables dropped, and on the machine's Redis what
 * the run left is checked (no lock, no queue) and deleted.
 */
import { createHash } from 'node:crypto';
import { expect } from '@jest/globals';
import Redis from 'ioredis';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import type { DbKind, SqlStrategy } from '../../servers/databases';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { typeormTarget } from '../conformance/typeorm.targets';
import { redisClusterSetup, redlockSetup, zookeeperStandaloneSetup } from '../support/store-setups';
import type { InputPropertyTarget } from './input-properties';
import { STORE_SCALE } from './key-inputs';

/** Inputs per property on a real store (the memory backend takes many more). */
const STORE_RUNS = 200;
/** A store call on a loaded machine: generous, so only a real hang fails. */
const STORE_CALL_MS = 10_000;

/** How hard every real store is tried. */
const ON_A_STORE = { runs: STORE_RUNS, scale: STORE_SCALE, callMs: STORE_CALL_MS } as const;
/**
 * Inputs per property on the SQL session strategies: each call that works pins a connection and
 * opens a session, several times the cost of a lease store's; the inputs are judged before any
 * I/O alike on every backend, and the `table` strategy of each database takes the full volume.
 */
const SESSION_STRATEGY_RUNS = 100;

/**
 * The machine's Redis; what the run leaves there is checked and removed. Its restart guard is
 * off: the properties ask leases up to the longest timer (about 24.8 days), and the guard, grown
 * to cover them, would let a Redis started less than that long ago grant nothing (the guard has
 * tests of its own).
 */
export const redisTarget: InputPropertyTarget = {
  name: 'redis (single node)',
  setup: async () => ({
    config: { type: 'redis', url: MACHINE_REDIS_URL, restartGuard: false },
  }),
  ...ON_A_STORE,
  leftovers: (keyPrefix) => redisLeftovers(MACHINE_REDIS_URL, keyPrefix),
};

/** A three-master Redis Cluster of its own. */
export const redisClusterTarget: InputPropertyTarget = {
  name: 'redis cluster (3 masters)',
  setup: redisClusterSetup,
  ...ON_A_STORE,
};

/** Redlock over three redis-server processes of its own. */
export const redlockTarget: InputPropertyTarget = {
  name: 'redlock (3 nodes)',
  setup: redlockSetup,
  ...ON_A_STORE,
};

/** A standalone ZooKeeper server of its own. */
export const zookeeperTarget: InputPropertyTarget = {
  name: 'zookeeper (standalone)',
  setup: zookeeperStandaloneSetup,
  ...ON_A_STORE,
};

/**
 * The typeorm backend with `strategy` on `kind`, in a table of its own dropped afterwards (the
 * conformance target's setup). A session strategy holds as many locks as its pool has
 * connections but the one kept for ordinary queries.
 */
export function sqlTarget(kind: DbKind, strategy: SqlStrategy): InputPropertyTarget {
  const conformance = typeormTarget(kind, strategy);
  return {
    name: conformance.name,
    setup: () => conformance.setup(''),
    ...ON_A_STORE,
    ...(conformance.capabilities.leaseBased ? {} : { runs: SESSION_STRATEGY_RUNS }),
    capacity: conformance.capabilities.leaseBased ? undefined : (config) => poolSizeOf(config) - 1,
  };
}

/** The pool size of a typeorm configuration (TypeORM's default: 10). */
function poolSizeOf(config: LockBackendConfig): number {
  const options = (config as { dataSourceOptions?: { poolSize?: number } }).dataSourceOptions;
  return options?.poolSize ?? 10;
}

/**
 * What a run left on a Redis node: no lock key (`{sha1(key)}key`, see `redisLockNames`) and no
 * queue; arrival counters (which expire) are deleted here with everything else of the run.
 * Fence counters are shared by buckets across keys (not under the prefix) and stay by design.
 */
async function redisLeftovers(url: string, keyPrefix: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  try {
    const names: string[] = [];
    const stream = redis.scanStream({ match: `{*}${keyPrefix}*`, count: 1_000 });
    for await (const batch of stream) names.push(...(batch as string[]));
    const locks = names.filter(isLockName);
    const queues: string[] = [];
    for (const name of names) if ((await redis.type(name)) === 'zset') queues.push(name);
    expect({ locks, queues }).toEqual({ locks: [], queues: [] });
    for (let i = 0; i < names.length; i += 500) await redis.del(...names.slice(i, i + 500));
  } finally {
    redis.disconnect();
  }
}

/** A lock's own key is its hash tag (the key's SHA-1) followed by the key itself. */
function isLockName(name: string): boolean {
  const end = name.indexOf('}');
  const fullKey = name.slice(end + 1);
  return name.slice(1, end) === createHash('sha1').update(fullKey).digest('base64url');
}
