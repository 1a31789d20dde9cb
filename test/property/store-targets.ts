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
import {
  dataSourceOptions,
  dropTable,
  uniqueTableName,
  type DbKind,
  type SqlStrategy,
} from '../../servers/databases';
import { MACHINE_REDIS_URL, startRedisCluster, startRedisNodes } from '../../servers/redis-servers';
import { startZkStandalone } from '../../servers/zk-servers';
import type { InputPropertyTarget } from './input-properties';
import { STORE_SCALE } from './key-inputs';

/** Inputs per property on a real store. */
const STORE_RUNS = 300;
/** A store call on a loaded machine: generous, so only a real hang fails. */
const STORE_CALL_MS = 10_000;
/** Pool of the session SQL strategies (each held lock pins a connection; one is reserved). */
const SQL_POOL_SIZE = 12;

/** The machine's Redis; what the run leaves there is checked and removed. */
export const redisTarget: InputPropertyTarget = {
  name: 'redis (single node)',
  setup: async () => ({ config: { type: 'redis', url: MACHINE_REDIS_URL } }),
  runs: STORE_RUNS,
  scale: STORE_SCALE,
  callMs: STORE_CALL_MS,
  leftovers: (keyPrefix) => redisLeftovers(MACHINE_REDIS_URL, keyPrefix),
};

/** A three-master Redis Cluster of its own. */
export const redisClusterTarget: InputPropertyTarget = {
  name: 'redis cluster (3 masters)',
  setup: async () => {
    const cluster = await startRedisCluster(3);
    return {
      config: { type: 'redis', clusterNodes: cluster.seeds },
      teardown: () => cluster.stop(),
    };
  },
  runs: STORE_RUNS,
  scale: STORE_SCALE,
  callMs: STORE_CALL_MS,
};

/** Redlock over three redis-server processes of its own. */
export const redlockTarget: InputPropertyTarget = {
  name: 'redlock (3 nodes)',
  setup: async () => {
    const nodes = await startRedisNodes(3);
    return {
      config: { type: 'redlock', urls: nodes.map((n) => n.url) },
      teardown: async () => {
        await Promise.all(nodes.map((n) => n.stop()));
      },
    };
  },
  runs: STORE_RUNS,
  scale: STORE_SCALE,
  callMs: STORE_CALL_MS,
};

/** A standalone ZooKeeper server of its own. */
export const zookeeperTarget: InputPropertyTarget = {
  name: 'zookeeper (standalone)',
  setup: async () => {
    const zk = await startZkStandalone();
    return {
      config: { type: 'zookeeper', connectionString: zk.connectString, sessionTimeout: 4_000 },
      teardown: () => zk.destroy(),
    };
  },
  runs: STORE_RUNS,
  scale: STORE_SCALE,
  callMs: STORE_CALL_MS,
};

/** The typeorm backend with `strategy` on `kind`, in a table of its own dropped afterwards. */
export function sqlTarget(kind: DbKind, strategy: SqlStrategy): InputPropertyTarget {
  const session = strategy !== 'table';
  return {
    name: `typeorm ${strategy} on ${kind}`,
    setup: async () => {
      const tableName = uniqueTableName('prop');
      const options = dataSourceOptions(kind, { poolSize: SQL_POOL_SIZE });
      return {
        config: {
          type: 'typeorm',
          dataSourceOptions: options,
          strategy,
          tableName,
          createTable: true,
        },
        teardown: async () => {
          await dropTable(
            kind,
            tableName,
            kind === 'sqlite' ? String(options.database) : undefined,
          );
          options.cleanup?.();
        },
      };
    },
    runs: STORE_RUNS,
    scale: STORE_SCALE,
    callMs: STORE_CALL_MS,
    capacity: session ? SQL_POOL_SIZE - 1 : undefined,
  };
}

/**
 * What a run left on a Redis node: no lock key (`{sha1(key)}key`, see `redisLockNames`) and no
 * queue; fence and arrival counters are kept by design (fences must keep rising) and are
 * deleted here with everything else of the run.
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
