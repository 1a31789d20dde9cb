import Redis from 'ioredis';
import Redlock from 'redlock';
import { createLock, DEFAULTS, IoredisAdapter, type Lock } from 'redlock-universal';
import { Mutex } from 'redis-semaphore';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { LockModuleOptions } from '../../lib';
import { zkCode, type ZkClient, type ZkModule } from '../../lib/backends/zookeeper/zk-types';
import { startLocks } from './nest-locks';
import { createSqlContender, isSqlContender, type SqlContenderName } from './sql-contenders';

/** One lock implementation as a worker process drives it: acquire (waiting), release. */
export interface Contender {
  acquire(key: string): Promise<{ release(): Promise<unknown> }>;
  close(): Promise<void>;
  /** SQL contenders: statements sent so far (what waiting costs the database shows in them). */
  statements?(): number;
}

/** Where the servers are, passed from the runner to each worker. */
export interface ServerAddresses {
  redisUrl: string;
  zkConnect?: string;
  /** The SQL contenders' lock table (the same name on each database; see sql-contenders.ts). */
  sqlTable?: string;
}

/** Every contender the bench knows, by name. */
export type ContenderName =
  | 'ours-redis'
  | 'redlock'
  | 'redlock-universal'
  | 'redis-semaphore'
  | 'raw-redis-floor'
  | 'ours-zookeeper'
  | 'raw-zookeeper'
  | SqlContenderName;

/** How long every waiting contender waits: never giving up under 8-way contention in a run. */
export const WAIT_MS = 60_000;
const TTL_MS = 30_000;
// node-zookeeper-client ships no types: the library's own structural types serve here too.
const zookeeper = createRequire(join(process.cwd(), 'package.json'))(
  'node-zookeeper-client',
) as ZkModule;
const OPEN = zookeeper.ACL.OPEN_ACL_UNSAFE;

/** The bench's ZooKeeper queue parent for the raw recipe. */
export const RAW_ZK_ROOT = '/bench-raw';

/** Builds a contender in this process. */
export async function createContender(
  name: ContenderName,
  servers: ServerAddresses,
): Promise<Contender> {
  if (isSqlContender(name)) {
    if (!servers.sqlTable) throw new Error('no SQL lock table given');
    return createSqlContender(name, servers.sqlTable);
  }
  switch (name) {
    case 'ours-redis':
      return ours({ backends: { redis: { type: 'redis', url: servers.redisUrl } } });
    case 'ours-zookeeper':
      return ours({
        backends: { zk: { type: 'zookeeper', connectionString: zkConnect(servers) } },
      });
    case 'redlock': {
      const client = new Redis(servers.redisUrl);
      // Defaults (retryDelay 200 ms, jitter 200 ms, drift 0.01) except retryCount: the default
      // 10 retries would make waiters give up under contention instead of measuring them.
      const redlock = new Redlock([client], { retryCount: -1 });
      return {
        acquire: (key) =>
          redlock.lock(key, TTL_MS).then((lock) => ({ release: () => lock.unlock() })),
        close: async () => void client.disconnect(),
      };
    }
    case 'redlock-universal': {
      const client = new Redis(servers.redisUrl);
      const adapter = new IoredisAdapter(client);
      // One lock object per key, reused, as its README shows (a new one would PING first).
      const locks = new Map<string, Lock>();
      return {
        acquire: async (key) => {
          let lock = locks.get(key);
          if (!lock) {
            // Defaults (retryDelay 100 ms, no jitter, ttl 30 s, circuit breaker on) except
            // retryAttempts: its default 3 would make waiters give up under contention; this
            // many retries wait at least as long as the other peers are given.
            const retryAttempts = Math.ceil(WAIT_MS / DEFAULTS.RETRY_DELAY);
            lock = createLock({ adapter, key, retryAttempts });
            locks.set(key, lock);
          }
          const held = lock;
          const handle = await held.acquire();
          return { release: () => held.release(handle) };
        },
        close: async () => void client.disconnect(),
      };
    }
    case 'redis-semaphore': {
      const client = new Redis(servers.redisUrl);
      return {
        acquire: async (key) => {
          // Defaults (retryInterval 10 ms, lockTimeout 10 s, refresh) but the acquire timeout.
          const mutex = new Mutex(client, key, { acquireTimeout: WAIT_MS });
          await mutex.acquire();
          return { release: () => mutex.release() };
        },
        close: async () => void client.disconnect(),
      };
    }
    case 'raw-redis-floor':
      throw new Error('the raw Redis floor has no waiting strategy; it runs uncontended only');
    case 'raw-zookeeper':
      return rawZookeeper(zkConnect(servers));
  }
}

function zkConnect(servers: ServerAddresses): string {
  if (!servers.zkConnect) throw new Error('no ZooKeeper address given');
  return servers.zkConnect;
}

async function ours(options: LockModuleOptions): Promise<Contender> {
  const app = await startLocks({ ...options, defaults: { waitTimeout: WAIT_MS, ttl: TTL_MS } });
  return {
    acquire: (key) => app.locks.acquire(key),
    close: () => app.close(),
  };
}

/** A connected node-zookeeper-client session. */
export async function connectZk(connect: string): Promise<ZkClient> {
  const client = zookeeper.createClient(connect, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ZooKeeper ${connect}: no session`)), 15_000);
    client.once('connected', () => {
      clearTimeout(timer);
      resolve();
    });
    client.connect();
  });
  return client;
}

/** Promisified node-zookeeper-client calls the raw recipe uses. */
export function zkCalls(client: ZkClient) {
  return {
    create: (path: string, mode: number) =>
      new Promise<string>((resolve, reject) =>
        client.create(path, null, OPEN, mode, (err, created) =>
          err ? reject(err) : resolve(created),
        ),
      ),
    children: (path: string) =>
      new Promise<string[]>((resolve, reject) =>
        client.getChildren(path, undefined, (err, names) => (err ? reject(err) : resolve(names))),
      ),
    remove: (path: string) =>
      new Promise<void>((resolve, reject) =>
        client.remove(path, -1, (err) => (err ? reject(err) : resolve())),
      ),
    /** Resolves when `path` is deleted or changes (or is already gone). */
    deleted: (path: string) =>
      new Promise<void>((resolve, reject) =>
        client.exists(
          path,
          () => resolve(),
          (err, stat) => (err ? reject(err) : stat ? undefined : resolve()),
        ),
      ),
  };
}

/** Creates `path` (one level under an existing parent) unless it exists. */
export async function ensureZkNode(client: ZkClient, path: string): Promise<void> {
  await new Promise<void>((resolve, reject) =>
    client.create(path, null, OPEN, zookeeper.CreateMode.PERSISTENT, (err) =>
      err && zkCode(err) !== zookeeper.Exception.NODE_EXISTS ? reject(err) : resolve(),
    ),
  );
}

/**
 * The floor on ZooKeeper: the textbook recipe with no extras (no fencing read, no protection
 * against orphaned nodes, no session liveness): create an ephemeral sequential node, list the
 * queue, watch the predecessor until ours is lowest; release = delete.
 */
async function rawZookeeper(connect: string): Promise<Contender> {
  const client = await connectZk(connect);
  const zk = zkCalls(client);
  await ensureZkNode(client, RAW_ZK_ROOT);
  return {
    acquire: async (key) => {
      const dir = `${RAW_ZK_ROOT}/${key.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
      const path = await zk
        .create(`${dir}/lock-`, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL)
        .catch(async (err: unknown) => {
          if (zkCode(err) !== zookeeper.Exception.NO_NODE) throw err;
          await ensureZkNode(client, dir);
          return zk.create(`${dir}/lock-`, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL);
        });
      const me = path.slice(dir.length + 1);
      for (;;) {
        const queue = (await zk.children(dir)).sort();
        const index = queue.indexOf(me);
        if (index === 0) break;
        await zk.deleted(`${dir}/${queue[index - 1]}`);
      }
      return { release: () => zk.remove(path) };
    },
    close: async () => client.close(),
  };
}
