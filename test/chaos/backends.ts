/**
 * The backend configurations of the chaos matrix: each starts (and stops) the servers it needs,
 * lists the TCP endpoints a worker connects to (so the runner can route a victim through proxies
 * or into a network namespace), builds the worker's `LockModuleOptions` for a given routing, and
 * knows its store-side fault and its liveness bounds.
 */
import type { LockModuleOptions } from '../../lib/lock.module-options';
import {
  createMariadbUser,
  dataSourceOptions,
  dropTable,
  killConnections,
  tempSqliteFile,
  uniqueTableName,
  type MariadbUser,
} from '../../servers/databases';
import { startRedisNode, startRedisNodes, type RedisNode } from '../../servers/redis-servers';
import { startZkEnsemble, type ZkEnsemble } from '../../servers/zk-servers';

/** A TCP address a worker connects to. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** Maps a store endpoint to the address a particular worker should use (identity, or a proxy). */
export type Route = (endpoint: Endpoint) => Endpoint;

/** Timing of one profile, ms. */
export interface ChaosTiming {
  /** Lock ttl (ZooKeeper: see `zkTtl`). */
  ttl: number;
  /** ZooKeeper session timeout. */
  zkSessionTimeout: number;
  /** ZooKeeper lock ttl: longer than the session on purpose (the library's default is 30 s vs 10 s). */
  zkTtl: number;
  /**
   * SQL `for-update` / `advisory`: the backend's `sessionTimeout`, how long the database keeps
   * a silent holder's session (and lock); shorter than `faultMs`, so a cell shows the key
   * granted while the holder is still cut off.
   */
  sqlSessionTimeout: number;
  /** How long a pause, black hole or partition lasts: longer than every ttl and session. */
  faultMs: number;
  /** How long the victim holds the lock it is struck in: longer than `faultMs`. */
  strikeHoldMs: number;
}

/** One column of the matrix. */
export interface ChaosBackend {
  readonly id: string;
  /** Column header. */
  readonly label: string;
  /** The lock lives with a session or connection (ZooKeeper, for-update, advisory), not a lease. */
  readonly sessionBound: boolean;
  /**
   * The lock lives with one database connection (SQL `for-update`, `advisory`): the server frees
   * it the moment it ends that connection, before the holder can hear of it.
   */
  readonly connectionBound: boolean;
  /** Only these faults (ids) run on this column in its profile; absent: every fault that applies. */
  readonly faults?: readonly string[];
  /** Has a server to restart, black-hole or partition from (not SQLite). */
  readonly networked: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Store endpoints workers connect to (after start). */
  endpoints(): Endpoint[];
  /** Module options for one worker, its endpoints mapped by `route`. */
  options(route: Route, timing: ChaosTiming): LockModuleOptions;
  /** ttl of the lock on this backend. */
  ttl(timing: ChaosTiming): number;
  /**
   * How long after its holder died or went silent the store frees a lock by itself: the lease
   * (ttl), or the session timeout (ZooKeeper's; the SQL session strategies' `sessionTimeout`,
   * after which the database ends a silent connection; a closed one it frees at once).
   */
  expiryMs(timing: ChaosTiming): number;
  /** Store-side fault: what it does (for the report), and it, resolving once the store serves again. */
  readonly storeFault?: { label: string; run(): Promise<void> };
}

const sqlKinds = {
  postgres: 'Postgres',
  mariadb: 'MariaDB',
  sqlite: 'SQLite',
} as const;

/** Redis on one node started by the harness; `persistent` = AOF with fsync always. */
export function redisBackend(persistent: boolean): ChaosBackend {
  let node: RedisNode | undefined;
  return {
    id: persistent ? 'redis' : 'redis-volatile',
    label: persistent ? 'redis (AOF)' : 'redis (no persistence)',
    sessionBound: false,
    connectionBound: false,
    networked: true,
    start: async () => {
      node = await startRedisNode({
        extraArgs: persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : [],
      });
    },
    stop: async () => node?.stop(),
    endpoints: () => [{ host: node!.host, port: node!.port }],
    options: (route, timing) => {
      const ep = route({ host: node!.host, port: node!.port });
      // A node that keeps every write needs no restart guard; one without persistence does, as
      // long as the longest lease the cells ask for.
      const restartGuard = persistent ? false : 3 * timing.ttl;
      const url = `redis://${ep.host}:${ep.port}`;
      return { backends: { chaos: { type: 'redis', url, restartGuard } } };
    },
    ttl: (t) => t.ttl,
    expiryMs: (t) => t.ttl,
    storeFault: {
      label: persistent ? 'redis-server SIGKILL + restart (AOF)' : 'redis-server restarted empty',
      run: async () => node!.restart('SIGKILL'),
    },
  };
}

/** Redlock over 3 harness-started nodes; the store fault kills one node and restarts it empty. */
export function redlockBackend(): ChaosBackend & { nodes(): RedisNode[] } {
  let nodes: RedisNode[] = [];
  return {
    id: 'redlock',
    label: 'redlock (3)',
    sessionBound: false,
    connectionBound: false,
    networked: true,
    nodes: () => nodes,
    start: async () => {
      nodes = await startRedisNodes(3);
    },
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
    endpoints: () => nodes.map((n) => ({ host: n.host, port: n.port })),
    options: (route, timing) => ({
      backends: {
        chaos: {
          type: 'redlock',
          urls: nodes.map((n) => {
            const ep = route({ host: n.host, port: n.port });
            return `redis://${ep.host}:${ep.port}`;
          }),
          nodeTimeout: 300,
          restartGuard: 3 * timing.ttl,
        },
      },
    }),
    ttl: (t) => t.ttl,
    expiryMs: (t) => t.ttl,
    storeFault: {
      label: 'one node SIGKILL + restart empty',
      run: async () => nodes[1].restart('SIGKILL'),
    },
  };
}

/** A 3-node ZooKeeper ensemble; the store fault kills the leader and restarts it. */
export function zookeeperBackend(): ChaosBackend {
  let ensemble: ZkEnsemble | undefined;
  return {
    id: 'zookeeper',
    label: 'zookeeper (3)',
    sessionBound: true,
    connectionBound: false,
    networked: true,
    start: async () => {
      ensemble = await startZkEnsemble(3);
    },
    stop: async () => ensemble?.stop(),
    endpoints: () => ensemble!.nodes.map((n) => ({ host: '127.0.0.1', port: n.clientPort })),
    options: (route, timing) => ({
      backends: {
        chaos: {
          type: 'zookeeper',
          connectionString: ensemble!.nodes
            .map((n) => {
              const ep = route({ host: '127.0.0.1', port: n.clientPort });
              return `${ep.host}:${ep.port}`;
            })
            .join(','),
          sessionTimeout: timing.zkSessionTimeout,
        },
      },
    }),
    ttl: (t) => t.zkTtl,
    expiryMs: (t) => t.zkSessionTimeout,
    storeFault: {
      label: 'leader SIGKILL + restart',
      run: async () => {
        const leader = await ensemble!.leader();
        await leader.stop('SIGKILL');
        await ensemble!.leader(); // the others elect a new one
        await leader.start();
      },
    },
  };
}

/**
 * A TypeORM backend on one database with one strategy, on its own table. Its workers connect
 * under an identity of their own (a Postgres application name, a throwaway MariaDB user), so the
 * store fault kills their connections and never those of a test file running at the same time.
 * `faults`: only these rows in the profile (see `ChaosBackend.faults`).
 */
export function sqlBackend(
  kind: 'postgres' | 'mariadb' | 'sqlite',
  strategy: 'table' | 'for-update' | 'advisory',
  faults?: readonly string[],
): ChaosBackend {
  const tableName = uniqueTableName('chaos');
  const applicationName = `ndl-${tableName}`;
  let sqlite: { file: string; cleanup(): void } | undefined;
  let mariadbUser: MariadbUser | undefined;
  const base = (): Record<string, unknown> => {
    switch (kind) {
      case 'sqlite':
        return dataSourceOptions('sqlite', { sqliteFile: sqlite!.file });
      case 'postgres':
        return dataSourceOptions(kind, { poolSize: 4, applicationName });
      case 'mariadb':
        return {
          ...dataSourceOptions(kind, { poolSize: 4 }),
          username: mariadbUser!.username,
          password: mariadbUser!.password,
        };
    }
  };
  return {
    id: `${kind}-${strategy}`,
    label: `${sqlKinds[kind]} ${strategy}`,
    sessionBound: strategy !== 'table',
    connectionBound: strategy !== 'table',
    networked: kind !== 'sqlite',
    ...(faults ? { faults } : {}),
    start: async () => {
      if (kind === 'sqlite') sqlite = tempSqliteFile();
      if (kind === 'mariadb') mariadbUser = await createMariadbUser();
    },
    stop: async () => {
      await dropTable(kind, tableName, sqlite?.file).catch(() => undefined);
      sqlite?.cleanup();
      await mariadbUser?.drop().catch(() => undefined);
    },
    endpoints: () => {
      if (kind === 'sqlite') return [];
      const o = base();
      return [{ host: String(o.host), port: Number(o.port) }];
    },
    options: (route, timing) => {
      const o = base();
      const at = kind === 'sqlite' ? {} : route({ host: String(o.host), port: Number(o.port) });
      return {
        backends: {
          chaos: {
            type: 'typeorm',
            dataSourceOptions: { ...o, ...at },
            strategy,
            tableName,
            createTable: true,
            ...(strategy === 'table' ? {} : { sessionTimeout: timing.sqlSessionTimeout }),
          },
        },
      };
    },
    ttl: (t) => t.ttl,
    expiryMs: (t) => (strategy === 'table' ? t.ttl : t.sqlSessionTimeout),
    ...(kind === 'sqlite'
      ? {}
      : {
          storeFault: {
            label: 'every client connection killed by the server',
            run: async () => {
              if (kind === 'mariadb') await mariadbUser!.kill();
              else await killConnections(kind, { applicationName });
            },
          },
        }),
  };
}
