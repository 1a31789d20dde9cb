import type { InjectionToken } from '@nestjs/common';
/** Configuration of one backend, discriminated by `type`; each backend folder adds its member. */
export type LockBackendConfig =
  | MemoryBackendConfig
  | RedisBackendConfig
  | RedlockBackendConfig
  | ZookeeperBackendConfig
  | TypeormBackendConfig
  | SqlBackendConfig;

/** In-process backend: FIFO waiters, ttl and fence; for tests and single-instance apps. */
export interface MemoryBackendConfig {
  /** Discriminator. */
  type: 'memory';
}

/**
 * Redis (or Valkey), single node or Cluster, on any of the clients: ioredis 5 or 6, node-redis
 * (`redis`) 4 to 6, iovalkey. Set exactly one of `url`, `clusterNodes` or `client`. A client you
 * pass is never closed by the module.
 */
export interface RedisBackendConfig {
  /** Discriminator. */
  type: 'redis';
  /** `redis://[user:password@]host:port[/db]` or `rediss://` (TLS); the module creates the client. */
  url?: string;
  /** Seed nodes of a Redis Cluster (`redis://host:port`); the module creates a Cluster client. */
  clusterNodes?: string[];
  /**
   * An existing client: an ioredis 5/6 or iovalkey `Redis` or `Cluster`, or a node-redis 4/5/6
   * client (`createClient()`) or cluster (`createCluster()`). Password, ACL user and TLS are
   * yours to set; a node-redis client is used once you have called its `connect()`.
   */
  client?: object;
  /**
   * The library the module makes its client with from `url` or `clusterNodes`: `'ioredis'`,
   * `'redis'` (node-redis) or `'iovalkey'`. Default: the first of them installed, in that order.
   */
  driver?: 'ioredis' | 'redis' | 'iovalkey';
  /** Options for the client the module creates from `url`, in the library's own shape, untouched. */
  redisOptions?: Record<string, unknown>;
  /** Cluster options for the client the module creates from `clusterNodes`, in the library's shape. */
  clusterOptions?: Record<string, unknown>;
  /**
   * When Redis does not answer at bootstrap: `'degraded'` (default) boots anyway, and every call
   * fails at once with the reason (`ECONNREFUSED 10.0.0.5:6379`, `WRONGPASS`...) until it
   * connects; `'fail'` rejects bootstrap with a `LockBackendError` naming the reason (after at
   * most 10 s for a store that never answers).
   */
  startup?: 'fail' | 'degraded';
  /**
   * Fence counters kept on a single Redis node (default 4096, 1 to 16384): keys share them by
   * bucket (hash slot modulo this), so however many distinct keys are locked the module leaves
   * at most this many counters. Each key's fences still rise strictly (they follow the server's
   * clock), also across instances running with different values. Not for a Cluster (one counter
   * per hash slot there: up to 16384).
   */
  fenceBuckets?: number;
  /**
   * How long after a Redis node (re)started it grants no lock, in ms (default: the module's
   * `defaults.ttl`, and at least every ttl a lock here asked for; `false`: off). A node restarted
   * without its data has forgotten the locks it granted while their holders still believe they
   * hold them; once it has been up longer than any lease it could have granted, they have all
   * ended. Read from the node's uptime when a connection is made or remade. Set it to the
   * longest ttl any instance uses, or `false` for a node that keeps every write (AOF with
   * `appendfsync always`). Not for a Cluster.
   */
  restartGuard?: number | false;
}

/**
 * Redlock over N independent Redis (or Valkey) nodes, the module's own implementation of the
 * algorithm on any of the Redis clients (no `redlock` package). Set exactly one of `urls` or
 * `clients`; use an odd N >= 3. Clients you pass are never closed.
 */
export interface RedlockBackendConfig {
  /** Discriminator. */
  type: 'redlock';
  /** One `redis://` URL per independent node (not replicas of one another). */
  urls?: string[];
  /**
   * Existing clients, one per independent node: ioredis 5/6 or iovalkey `Redis` made with
   * `enableOfflineQueue: false`, or node-redis clients made with `disableOfflineQueue: true`
   * (a quorum must hear at once that a node is down).
   */
  clients?: object[];
  /** The library the module makes its clients with from `urls` (see the redis backend's). */
  driver?: 'ioredis' | 'redis' | 'iovalkey';
  /** Options for the clients the module creates from `urls`, in the library's shape, passed through. */
  redisOptions?: Record<string, unknown>;
  /** Allowed clock drift as a fraction of the ttl (default 0.01); leases are trusted `ttl * (1 - driftFactor) - 2 ms`. */
  driftFactor?: number;
  /** Per-node bound, in ms, for connecting and for each command (default 2 000). */
  nodeTimeout?: number;
  /**
   * When fewer than a quorum of nodes answer at bootstrap (after waiting up to `nodeTimeout`
   * for each): `'degraded'` (default) boots anyway, and every call fails at once naming each
   * down node's reason until a quorum is back; `'fail'` rejects bootstrap with a
   * `LockBackendError` naming them.
   */
  startup?: 'fail' | 'degraded';
  /** Fence counters kept on each node (default 4096, 1 to 16384), as for a single Redis. */
  fenceBuckets?: number;
  /**
   * How long after a node (re)started it does not count towards a quorum, in ms (default: the
   * module's `defaults.ttl`, and at least every ttl a lock here asked for; `false`: off). A node
   * restarted without its data has forgotten the copies it held, so the lock could rest on too
   * few nodes: until it has been up longer than any lease, its vote is not counted. See the
   * redis backend's `restartGuard`.
   */
  restartGuard?: number | false;
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
  /**
   * `host:port[,host:port...][/chroot]`: host names or IPv4 addresses (port default 2181), and
   * an optional chroot that is a valid znode path; checked at bootstrap.
   */
  connectionString: string;
  /**
   * Parent of all lock nodes (default `/nestjs-distributed-lock`): an absolute znode path with
   * no `.`/`..` element and no character ZooKeeper refuses (control characters, characters
   * outside the BMP, private-use and non-characters); checked at bootstrap.
   */
  rootPath?: string;
  /** Requested session timeout in ms (default 10 000; the server may clamp it to its min/max). */
  sessionTimeout?: number;
  /** Credentials added to the session, e.g. `[{ scheme: 'digest', credentials: 'user:password' }]`. */
  auth?: Array<{
    /** Authentication scheme, e.g. `'digest'`. */
    scheme: string;
    /** The scheme's credentials, e.g. `'user:password'` for digest. */
    credentials: string;
  }>;
  /** ACL of created nodes: `'creator'` (default with `auth`: only that identity) or `'open'` (default without). */
  acl?: 'open' | 'creator';
  /** Longest bootstrap waits for the first connection (default 15 000 ms); see `startup`. */
  connectTimeout?: number;
  /**
   * What bootstrap does when the ensemble does not answer. Unset (default): wait up to
   * `connectTimeout` for a connection, then boot and keep connecting in the background.
   * `'fail'`: reject bootstrap with a `LockBackendError` naming the cause as soon as every
   * server refused (or `connectTimeout` passed without a session). `'degraded'`: boot as soon as
   * every server refused, log the cause, and keep connecting. In every case a lock call made
   * while the ensemble is known down fails at once with the cause.
   */
  startup?: 'fail' | 'degraded';
}

/**
 * SQL databases through TypeORM (install `typeorm` and the driver: `pg`, `mysql2` or
 * `better-sqlite3`). Set exactly one of `dataSource`, `dataSourceToken`, `dataSourceOptions`.
 */
export interface TypeormBackendConfig {
  /** Discriminator. */
  type: 'typeorm';
  /** An existing TypeORM DataSource (initialized on first use if it is not yet; never destroyed by the module). */
  dataSource?: object;
  /** DI token of a DataSource, e.g. `getDataSourceToken()` from `@nestjs/typeorm` (looked up lazily). */
  dataSourceToken?: InjectionToken;
  /** DataSource options: the module creates, initializes and (on shutdown) destroys it. */
  dataSourceOptions?: Record<string, unknown>;
  /**
   * `'table'` (default; Postgres, MySQL/MariaDB, SQLite): lease rows with expiry.
   * `'for-update'` (Postgres, MySQL/MariaDB): row lock in an open transaction on a pinned connection.
   * `'advisory'` (Postgres, MySQL/MariaDB): session advisory lock on a pinned connection.
   */
  strategy?: 'table' | 'for-update' | 'advisory';
  /** Lock table (default `distributed_lock`); an identifier, always quoted. */
  tableName?: string;
  /** Create the lock table on first use if it is missing (default `false`: run the migration). */
  createTable?: boolean;
  /**
   * What bootstrap does when the database cannot be reached; `dataSourceOptions` only (a
   * DataSource you pass in is connected by your app). `'fail'` (default): the bootstrap fails
   * with the cause. `'degraded'`: the app starts, a warning says why, `health()` reports the
   * backend down, and each lock call fails at once with the cause until the database answers.
   */
  startup?: 'fail' | 'degraded';
  /**
   * `for-update` and `advisory` only: how long, in ms, the database keeps the lock of a holder
   * it no longer hears from (cut-off network, frozen process) before it ends that session and
   * frees the lock (default 30 000, at least 1 000). Set on the lock's own connection:
   * PostgreSQL `idle_in_transaction_session_timeout` (`for-update`) or `idle_session_timeout`
   * (`advisory`, PostgreSQL 14+); MariaDB/MySQL `wait_timeout` (whole seconds, rounded up). A
   * live process keeps its connections busier than that, and a lease is trusted for at most
   * 90 % of it.
   */
  sessionTimeout?: number;
  /**
   * `for-update`, and `advisory` on PostgreSQL (whose waiters wait in its lock queue): how many
   * connections may wait in the database for a busy lock at once
   * (a whole number, at most the pool size minus two; default a quarter of the pool, at least
   * one, so a pool of 10 lends 2). A waiting connection is pinned for the whole wait, so this
   * bounds what waiting takes from the pool: the rest stays for holders and ordinary queries.
   * The callers of a process waiting for one key share one waiting connection (the first in a
   * local FIFO line waits in the database, the others wait in process behind it); waiters past
   * the cap are never refused: they try without waiting and sleep until a waiting connection
   * frees (or their back-off passes), within their `waitTimeout` and `signal` as ever. `0`:
   * never wait in the database (waiters only try and sleep).
   */
  maxWaitingConnections?: number;
  /**
   * `table` only, PostgreSQL: whether waiters are woken by release notifications (default
   * `true`). The backend then keeps one `LISTEN` connection of its own, outside the pool, and a
   * waiter gets the lock within a round trip of its release. `false` opens no listening
   * connection: waiters poll with back-off and jitter (5–250 ms), as on MariaDB and SQLite. Set
   * it behind PgBouncer in transaction pooling mode (which breaks `LISTEN`), or where the host
   * caps connections and one more per backend is too many. Releases are still announced (the
   * release statement's `pg_notify`), so other instances that listen still wake at once. No
   * effect on MySQL/MariaDB and SQLite, whose waiters always poll.
   */
  releaseNotifications?: boolean;
  /**
   * How many fence counter rows the lock table keeps (default 4 096, at most 1 048 576): each
   * key draws its fences from one of them (picked from its SHA-256), so the table stays bounded
   * however many distinct keys are locked. More buckets means fewer keys serialised on one
   * counter row. Every instance on a table must use the same value; a change takes effect
   * when a backend starts, every counter raised to the largest (see the README, "Fences and
   * the table's size").
   */
  fenceBuckets?: number;
}

/**
 * SQL databases on the driver pool the app already runs, with no ORM: a `pg` Pool (PostgreSQL), a
 * `mysql2` pool of either API (MariaDB, MySQL), a `better-sqlite3` Database (SQLite, `table`
 * strategy), or a TypeORM DataSource (then the same backend as `type: 'typeorm'`). The module never closes
 * the client. Every option but the DataSource ones is as for `type: 'typeorm'`.
 */
export interface SqlBackendConfig extends Omit<
  TypeormBackendConfig,
  'type' | 'dataSource' | 'dataSourceToken' | 'dataSourceOptions' | 'startup'
> {
  /** Discriminator. */
  type: 'sql';
  /**
   * A `pg` Pool, a `mysql2` pool (callback or promise API), a `better-sqlite3` Database, or a
   * TypeORM DataSource.
   */
  client: object;
}
