/**
 * Configuration of one backend, discriminated by `type`. Each backend folder contributes its
 * own member; backends other than `memory` arrive with their issues.
 */
export type LockBackendConfig =
  MemoryBackendConfig | RedisBackendConfig | RedlockBackendConfig | ZookeeperBackendConfig;

/** In-process backend: FIFO waiters, ttl and fence; for tests and single-instance apps. */
export interface MemoryBackendConfig {
  /** Discriminator. */
  type: 'memory';
}

/**
 * Redis, single node or Cluster, on ioredis (install `ioredis`). Set exactly one of `url`,
 * `clusterNodes` or `client`. A client you pass is never closed by the module.
 */
export interface RedisBackendConfig {
  /** Discriminator. */
  type: 'redis';
  /** `redis://[user:password@]host:port[/db]` or `rediss://` (TLS); the module creates the client. */
  url?: string;
  /** Seed nodes of a Redis Cluster (`redis://host:port`); the module creates a Cluster client. */
  clusterNodes?: string[];
  /** An existing ioredis `Redis` or `Cluster` (password, ACL user, TLS are yours to set). */
  client?: object;
  /** ioredis options for the client the module creates from `url`, passed through untouched. */
  redisOptions?: Record<string, unknown>;
  /** ioredis Cluster options for the client the module creates from `clusterNodes`, untouched. */
  clusterOptions?: Record<string, unknown>;
}

/**
 * Redlock over N independent Redis nodes (install `redlock@4.2.0` and `ioredis`). Set exactly
 * one of `urls` or `clients`; use an odd N >= 3. Clients you pass are never closed.
 */
export interface RedlockBackendConfig {
  /** Discriminator. */
  type: 'redlock';
  /** One `redis://` URL per independent node (not replicas of one another). */
  urls?: string[];
  /** Existing ioredis clients, one per independent node. */
  clients?: object[];
  /** ioredis options for the clients the module creates from `urls`, passed through. */
  redisOptions?: Record<string, unknown>;
  /** Allowed clock drift as a fraction of the ttl (default 0.01); leases are trusted `ttl * (1 - driftFactor) - 2 ms`. */
  driftFactor?: number;
  /** Per-node bound, in ms, for connecting and for each command (default 2 000). */
  nodeTimeout?: number;
}

/**
 * ZooKeeper (install `node-zookeeper-client`): fair (FIFO), session-bound locks with czxid
 * fences. A lock lives as long as the session; `sessionTimeout` bounds how long a crashed or
 * cut-off holder blocks others, and how long a holder may keep believing it holds after losing
 * contact.
 */
export interface ZookeeperBackendConfig {
  /** Discriminator. */
  type: 'zookeeper';
  /** `host:port[,host:port...][/chroot]`. */
  connectionString: string;
  /** Parent of all lock nodes (default `/nestjs-distributed-lock`). */
  rootPath?: string;
  /** Requested session timeout in ms (default 10 000; the server may clamp it to its min/max). */
  sessionTimeout?: number;
  /** Credentials added to the session, e.g. `[{ scheme: 'digest', credentials: 'user:password' }]`. */
  auth?: Array<{ scheme: string; credentials: string }>;
  /** ACL of created nodes: `'creator'` (default with `auth`: only that identity) or `'open'` (default without). */
  acl?: 'open' | 'creator';
  /** How long bootstrap waits for the first connection before going on in the background (default 15 000 ms). */
  connectTimeout?: number;
}
