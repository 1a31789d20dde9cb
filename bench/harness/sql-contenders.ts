import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createConnection } from 'mysql2/promise';
import type { TypeormBackendConfig } from '../../lib/backends/backend-config';
import { dataSourceOptions } from '../../servers/databases';
import { startLocks } from './nest-locks';
import { StatementCounter } from './statement-counter';
import { median } from './stats';

/** A lock as a bench worker drives it (the shape of `Contender` in contenders.ts). */
interface SqlContender {
  acquire(key: string): Promise<{ release(): Promise<unknown> }>;
  close(): Promise<void>;
  /** Statements sent so far. */
  statements(): number;
}

/** The SQL databases the contended SQL bench runs on. */
export type SqlKind = 'postgres' | 'mariadb';

/**
 * The SQL contenders: ours through the typeorm backend (PostgreSQL `table` woken by
 * `LISTEN`/`NOTIFY` or polling with `releaseNotifications: false`, `for-update` on both
 * databases), and the raw floor of each database: a transaction per section holding
 * `SELECT ... FOR UPDATE` on a dedicated connection, so waiters queue in the database itself.
 * In the order the contended SQL suite runs them.
 */
export const SQL_CONTENDERS = {
  'ours-pg-table': { kind: 'postgres', strategy: 'table', releaseNotifications: true },
  'ours-pg-table-polling': { kind: 'postgres', strategy: 'table', releaseNotifications: false },
  'ours-pg-for-update': { kind: 'postgres', strategy: 'for-update' },
  'raw-pg-for-update': { kind: 'postgres', strategy: 'raw' },
  'ours-mariadb-for-update': { kind: 'mariadb', strategy: 'for-update' },
  'raw-mariadb-for-update': { kind: 'mariadb', strategy: 'raw' },
} as const satisfies Record<
  string,
  {
    kind: SqlKind;
    strategy: 'table' | 'for-update' | 'raw';
    releaseNotifications?: boolean;
  }
>;

/** Name of one SQL contender. */
export type SqlContenderName = keyof typeof SQL_CONTENDERS;

/** Whether `name` is one of the {@link SQL_CONTENDERS}. */
export function isSqlContender(name: string): name is SqlContenderName {
  return Object.hasOwn(SQL_CONTENDERS, name);
}

/** The raw floor's table beside the lock table `table`: one row per key, nothing else. */
export function floorTable(table: string): string {
  return `${table}_floor`;
}

/** Long enough never to give up under contention in a bench run. */
const WAIT_MS = 60_000;
const TTL_MS = 30_000;

/**
 * Builds a SQL contender in this process, on the lock table `table` (and its floor table),
 * both made beforehand by {@link prepareSqlTables}.
 */
export async function createSqlContender(
  name: SqlContenderName,
  table: string,
): Promise<SqlContender> {
  const spec: { kind: SqlKind; strategy: string; releaseNotifications?: boolean } =
    SQL_CONTENDERS[name];
  if (spec.strategy === 'raw') return rawFloor(spec.kind, floorTable(table));
  // Every statement the backend sends (TypeORM logs each one, whatever its logging setting);
  // the PostgreSQL listener's LISTEN goes through a client of its own and is not counted.
  const counter = new StatementCounter();
  const backend: TypeormBackendConfig = {
    type: 'typeorm',
    dataSourceOptions: { ...dataSourceOptions(spec.kind), logger: counter },
    strategy: spec.strategy as 'table' | 'for-update',
    tableName: table,
    ...(spec.releaseNotifications === undefined
      ? {}
      : { releaseNotifications: spec.releaseNotifications }),
  };
  const app = await startLocks({
    backends: { db: backend },
    defaults: { waitTimeout: WAIT_MS, ttl: TTL_MS },
  });
  return {
    acquire: (key) => app.locks.acquire(key),
    close: () => app.close(),
    statements: () => counter.count,
  };
}

/** A plain driver connection (pg Client or mysql2), rows as objects. */
export interface SqlConnection {
  query(sql: string, params?: readonly unknown[]): Promise<Array<Record<string, unknown>>>;
  end(): Promise<void>;
}

/** The parts of a `pg` Client the bench uses (pg ships no types). */
interface PgClient {
  connect(): Promise<void>;
  query(
    sql: string,
    params?: readonly unknown[],
  ): Promise<{ rows: Array<Record<string, unknown>> }>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** A driver connection of its own to the test database of `kind`, outside any pool. */
export async function connectSql(kind: SqlKind): Promise<SqlConnection> {
  const o = dataSourceOptions(kind);
  const settings = {
    host: String(o.host),
    port: Number(o.port),
    user: String(o.username),
    database: String(o.database),
    ...(o.password === undefined ? {} : { password: String(o.password) }),
  };
  if (kind === 'mariadb') {
    const connection = await createConnection(settings);
    connection.on('error', () => undefined); // a dropped connection must not crash the bench
    return {
      query: async (sql, params) =>
        (await connection.query(sql, params))[0] as Array<Record<string, unknown>>,
      end: () => connection.end(),
    };
  }
  const { Client } = createRequire(join(process.cwd(), 'package.json'))('pg') as {
    Client: new (config: Record<string, unknown>) => PgClient;
  };
  const client = new Client(settings);
  client.on('error', () => undefined);
  await client.connect();
  return {
    query: async (sql, params) => (await client.query(sql, params)).rows,
    end: () => client.end(),
  };
}

/** The raw floor's statements on each database. */
const FLOOR_SQL: Record<
  SqlKind,
  {
    create(t: string): string;
    makeRow(t: string): string;
    lockRow(t: string): string;
    begin: string;
  }
> = {
  postgres: {
    create: (t) => `CREATE TABLE IF NOT EXISTS "${t}" (k VARCHAR(200) PRIMARY KEY)`,
    makeRow: (t) => `INSERT INTO "${t}" (k) VALUES ($1) ON CONFLICT DO NOTHING`,
    lockRow: (t) => `SELECT k FROM "${t}" WHERE k = $1 FOR UPDATE`,
    begin: 'BEGIN',
  },
  mariadb: {
    create: (t) => `CREATE TABLE IF NOT EXISTS \`${t}\` (k VARCHAR(200) PRIMARY KEY) ENGINE=InnoDB`,
    makeRow: (t) => `INSERT IGNORE INTO \`${t}\` (k) VALUES (?)`,
    lockRow: (t) => `SELECT k FROM \`${t}\` WHERE k = ? FOR UPDATE`,
    begin: 'START TRANSACTION',
  },
};

/**
 * The raw floor: a transaction per section on a dedicated connection, `SELECT ... FOR UPDATE`
 * of the key's row blocking in the database's own lock queue until the holder's `COMMIT`
 * (PostgreSQL waits as long as it takes; MariaDB up to `innodb_lock_wait_timeout`, 50 s by
 * default). The row is made on the first use of a key (its warm-up, or the ramp-up the runner
 * leaves out).
 */
async function rawFloor(kind: SqlKind, table: string): Promise<SqlContender> {
  const connection = await connectSql(kind);
  const sql = FLOOR_SQL[kind];
  const made = new Set<string>();
  let statements = 0;
  const query = (text: string, params?: readonly unknown[]) => {
    statements++;
    return connection.query(text, params);
  };
  return {
    acquire: async (key) => {
      if (!made.has(key)) {
        await query(sql.makeRow(table), [key]);
        made.add(key);
      }
      await query(sql.begin);
      await query(sql.lockRow(table), [key]);
      return { release: () => query('COMMIT') };
    },
    close: () => connection.end(),
    statements: () => statements,
  };
}

/**
 * Makes the lock table `table` (through the backend itself: a first lock with `createTable`)
 * and its raw floor table on `kind`, before the workers start, so that no worker's first
 * section pays for (or races on) the schema.
 */
export async function prepareSqlTables(kind: SqlKind, table: string): Promise<void> {
  const app = await startLocks({
    backends: {
      db: {
        type: 'typeorm',
        dataSourceOptions: dataSourceOptions(kind),
        tableName: table,
        createTable: true,
      },
    },
  });
  try {
    await (await app.locks.acquire('bench-prepare')).release();
  } finally {
    await app.close();
  }
  await withSql(kind, (connection) => connection.query(FLOOR_SQL[kind].create(floorTable(table))));
}

/** Runs `work` on a connection of its own, closed afterwards. */
export async function withSql<T>(
  kind: SqlKind,
  work: (connection: SqlConnection) => Promise<T>,
): Promise<T> {
  const connection = await connectSql(kind);
  try {
    return await work(connection);
  } finally {
    await connection.end();
  }
}

/** Median round trip of `SELECT 1` on a connection of its own, ms: the ideal's one round trip. */
export function sqlRoundTripMs(kind: SqlKind, samples = 500): Promise<number> {
  return withSql(kind, async (connection) => {
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const start = performance.now();
      await connection.query('SELECT 1 AS one');
      if (i >= samples / 10) times.push(performance.now() - start);
    }
    return median(times);
  });
}
