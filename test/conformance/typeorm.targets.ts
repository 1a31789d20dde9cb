import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  dataSourceOptions,
  dropTable,
  newMysql2Pool,
  newPgPool,
  tempSqliteFile,
  uniqueTableName,
  type DbKind,
} from '../../servers/databases';
import type { ConformanceTarget } from './lock-conformance';

/**
 * What each strategy is: the table a lease row that expires by itself, polled; for-update a row
 * lock held by a connection's open transaction, waited for in the database's own lock queue;
 * advisory a session lock of a connection, polled on MariaDB, counted there with slot names
 * (at most 64 permits) but never shared (see ON_POSTGRES).
 */
const CAPABILITIES = {
  table: { leaseBased: true, fencing: true, waiting: 'queue', shared: true, permits: true },
  'for-update': { leaseBased: false, fencing: true, waiting: 'queue', shared: true, permits: true },
  advisory: {
    leaseBased: false,
    fencing: true,
    waiting: 'poll',
    shared: false,
    permits: true,
    maxPermits: 64,
  },
} as const satisfies Record<string, ConformanceTarget['capabilities']>;

/**
 * Where a strategy does more on one database: PostgreSQL advisory locks have a share mode and a
 * lock queue (shared locks, waiting in the database); MariaDB's GET_LOCK has neither.
 */
const ON_POSTGRES: Partial<Record<string, ConformanceTarget['capabilities']>> = {
  advisory: { leaseBased: false, fencing: true, waiting: 'queue', shared: true, permits: true },
};

/**
 * A typeorm conformance target: its own table (created by the backend on first use), dropped
 * after the run. Session strategies pin a connection per held lock, so the pool is sized for
 * the battery's widest case (11 locks held at once).
 */
export function typeormTarget(
  kind: DbKind,
  strategy: 'table' | 'for-update' | 'advisory',
): ConformanceTarget {
  return {
    name: `typeorm ${strategy} on ${kind}`,
    setup: async () => {
      const tableName = uniqueTableName('conf');
      const options = dataSourceOptions(kind, { poolSize: 20 });
      const cleanup = (options as { cleanup?: () => void }).cleanup;
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
          cleanup?.();
        },
      };
    },
    capabilities:
      (kind === 'postgres' ? ON_POSTGRES[strategy] : undefined) ?? CAPABILITIES[strategy],
    // table renews every due lease in a few statements; a session lock's renewal probes its own
    // pinned connection, one round trip per lock whatever is batched
    batchedRenewal: strategy === 'table',
    shortTtl: 600,
    sharedAcrossApps: true,
    // inspect on every strategy; forceRelease clears the row (table) or ends the holder's
    // session (for-update, advisory: the server says which session holds the lock)
    admin: true,
  };
}

/**
 * The same strategies on PostgreSQL through `type: 'sql'` and a bare `pg` Pool of 20 (the app's:
 * ended by the teardown, never by the module), in a table of their own.
 */
export function pgPoolTarget(strategy: 'table' | 'for-update' | 'advisory'): ConformanceTarget {
  const typeorm = typeormTarget('postgres', strategy);
  return {
    ...typeorm,
    name: `sql (pg Pool) ${strategy} on postgres`,
    setup: async () => {
      const tableName = uniqueTableName('conf');
      const pool = newPgPool({ max: 20 });
      return {
        config: { type: 'sql', client: pool, strategy, tableName, createTable: true },
        teardown: async () => {
          await dropTable('postgres', tableName);
          await pool.end();
        },
      };
    },
  };
}

/**
 * The same strategies on MariaDB through `type: 'sql'` and a bare `mysql2` pool of 20 (the
 * callback API, or with `promise` its promise wrapper), in a table of their own.
 */
export function mysql2PoolTarget(
  strategy: 'table' | 'for-update' | 'advisory',
  api: 'callback' | 'promise',
): ConformanceTarget {
  const typeorm = typeormTarget('mariadb', strategy);
  return {
    ...typeorm,
    name: `sql (mysql2 ${api} pool) ${strategy} on mariadb`,
    setup: async () => {
      const tableName = uniqueTableName('conf');
      const pool = newMysql2Pool({ connectionLimit: 20, promise: api === 'promise' });
      return {
        config: { type: 'sql', client: pool.client, strategy, tableName, createTable: true },
        teardown: async () => {
          await dropTable('mariadb', tableName);
          await pool.end();
        },
      };
    },
  };
}

/**
 * The table strategy on SQLite through `type: 'sql'` and a bare `better-sqlite3` Database on a
 * file of its own (the app's: closed by the teardown, never by the module).
 */
export function betterSqlite3Target(): ConformanceTarget {
  const typeorm = typeormTarget('sqlite', 'table');
  return {
    ...typeorm,
    name: 'sql (better-sqlite3 Database) table on sqlite',
    setup: async () => {
      const temp = tempSqliteFile();
      const Database = createRequire(join(process.cwd(), 'package.json'))('better-sqlite3') as new (
        file: string,
      ) => { close(): void };
      const database = new Database(temp.file);
      return {
        config: {
          type: 'sql',
          client: database,
          tableName: uniqueTableName('conf'),
          createTable: true,
        },
        teardown: async () => {
          database.close();
          temp.cleanup();
        },
      };
    },
  };
}
