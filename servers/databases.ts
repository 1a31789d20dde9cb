// The SQL test databases: TypeORM options for PostgreSQL, MariaDB and SQLite (better-sqlite3), unique
// table names, dropping tables, and killing connections from the server side (fault injection).
// Servers: scripts/ensure-services.sh makes sure both answer and hold the database `locktest`.
// Each helper opens its own short-lived admin connection and closes it before returning.
//
// `pg` and `better-sqlite3` ship without type declarations (no @types/pg, @types/better-sqlite3 in
// devDependencies), so they are loaded with a require() from the repo root and typed by the
// minimal interfaces below; `mysql2/promise` has its own types.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createConnection, type Connection, type RowDataPacket } from 'mysql2/promise';
import { sleep, trackDir } from './child-processes';

/** The test databases: two servers of the machine, and SQLite files. */
export type DbKind = 'postgres' | 'mariadb' | 'sqlite';

/** How the typeorm backend holds a lock. */
export type SqlStrategy = 'table' | 'for-update' | 'advisory';

/**
 * Every (database, strategy) pair the typeorm backend supports: SQLite has neither row nor
 * advisory locks, so `table` only; MariaDB takes `for-update` whatever its declared type (the
 * backend asks the server), MySQL does not.
 */
export const SQL_LOCK_PAIRS: ReadonlyArray<{
  readonly kind: DbKind;
  readonly strategy: SqlStrategy;
}> = [
  { kind: 'postgres', strategy: 'table' },
  { kind: 'postgres', strategy: 'for-update' },
  { kind: 'postgres', strategy: 'advisory' },
  { kind: 'mariadb', strategy: 'table' },
  { kind: 'mariadb', strategy: 'for-update' },
  { kind: 'mariadb', strategy: 'advisory' },
  { kind: 'sqlite', strategy: 'table' },
];

/** The database the tests use on both servers (created by scripts/ensure-services.sh). */
export const TEST_DATABASE = 'locktest';

const DEFAULT_POOL_SIZE = 10;
const KILL_WAIT_MS = 5_000;
const ADMIN_APPLICATION_NAME = 'ndl-test-admin';
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_IDENTIFIER_LENGTH = 63; // PostgreSQL's limit (MariaDB: 64)

// ---------------------------------------------------------------------------------------------
// Untyped drivers

interface PgQueryResult<R> {
  rows: R[];
  rowCount: number | null;
}
interface PgClient {
  connect(): Promise<void>;
  query<R>(sql: string, params?: readonly unknown[]): Promise<PgQueryResult<R>>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}
interface PgModule {
  Client: new (config: Record<string, unknown>) => PgClient;
  Pool: new (config: Record<string, unknown>) => TestPgPool;
}

/** A `pg` Pool as the tests hold it (passed to the module as `client`, ended by the test). */
export interface TestPgPool {
  end(): Promise<void>;
  query<R>(sql: string, params?: readonly unknown[]): Promise<PgQueryResult<R>>;
  readonly totalCount: number;
  readonly idleCount: number;
}
interface SqliteDatabase {
  exec(sql: string): unknown;
  close(): unknown;
}
type SqliteConstructor = new (
  file: string,
  options?: { fileMustExist?: boolean },
) => SqliteDatabase;

/** require() resolving from the repo root (Jest: `process.cwd()` is the repo root). */
const requireFromRoot = createRequire(join(process.cwd(), 'package.json'));
const loadPg = (): PgModule => requireFromRoot('pg') as PgModule;
const loadSqlite = (): SqliteConstructor => requireFromRoot('better-sqlite3') as SqliteConstructor;

/**
 * A `pg` Pool on the test database (`max` connections, default 10), as an app without an ORM
 * makes one.
 */
export function newPgPool(opts: { max?: number; applicationName?: string } = {}): TestPgPool {
  const { host, port, user, password } = postgresSettings();
  const { Pool } = loadPg();
  return new Pool({
    host,
    port,
    user,
    ...(password === undefined ? {} : { password }),
    database: TEST_DATABASE,
    max: opts.max ?? DEFAULT_POOL_SIZE,
    ...(opts.applicationName === undefined ? {} : { application_name: opts.applicationName }),
  });
}

/**
 * A `mysql2` pool on the test database of the machine's MariaDB (`connectionLimit`, default
 * 10), as an app without an ORM makes one: `client` is the callback pool, or with `promise` its
 * promise wrapper; `end` closes it either way.
 */
export function newMysql2Pool(opts: { connectionLimit?: number; promise?: boolean } = {}): {
  client: object;
  end(): Promise<void>;
} {
  const mysql2 = requireFromRoot('mysql2') as {
    createPool(o: object): { end(cb: (err?: Error | null) => void): void; promise(): object };
  };
  const pool = mysql2.createPool({
    ...mariadbSettings(),
    database: TEST_DATABASE,
    connectionLimit: opts.connectionLimit ?? DEFAULT_POOL_SIZE,
  });
  return {
    client: opts.promise ? pool.promise() : pool,
    end: () =>
      new Promise<void>((resolve, reject) => pool.end((err) => (err ? reject(err) : resolve()))),
  };
}

// ---------------------------------------------------------------------------------------------
// Connection settings (environment overrides)

function envPort(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port <= 0 || port > 65_535) {
    throw new Error(`${name}=${raw} is not a valid port`);
  }
  return port;
}

function postgresSettings(): { host: string; port: number; user: string; password?: string } {
  return {
    host: process.env.PGHOST || '127.0.0.1',
    port: envPort('PGPORT', 5432),
    user: process.env.PGUSER || 'postgres',
    ...(process.env.PGPASSWORD ? { password: process.env.PGPASSWORD } : {}),
  };
}

function mariadbSettings(): { host: string; port: number; user: string; password: string } {
  return {
    host: process.env.MYSQL_HOST || '127.0.0.1',
    port: envPort('MYSQL_PORT', 3306),
    user: process.env.MYSQL_USER || 'root',
    password: process.env.MYSQL_PASSWORD ?? '',
  };
}

async function withPostgres<T>(work: (client: PgClient) => Promise<T>): Promise<T> {
  const { Client } = loadPg();
  const client = new Client({
    ...postgresSettings(),
    database: TEST_DATABASE,
    application_name: ADMIN_APPLICATION_NAME,
  });
  client.on('error', () => undefined); // a late server-side error must not crash the test process
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function withMariadb<T>(work: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = await createConnection({ ...mariadbSettings(), database: TEST_DATABASE });
  connection.on('error', () => undefined);
  try {
    return await work(connection);
  } finally {
    await connection.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Public helpers

/** What dataSourceOptions() returns: plain TypeORM DataSourceOptions, plus `cleanup` (see there). */
export type TestDataSourceOptions = Record<string, unknown> & {
  /** Only on sqlite options whose file this module created: removes its temp dir. */
  readonly cleanup?: () => void;
};

/**
 * TypeORM DataSourceOptions for the test database of that kind: for postgres and mariadb the
 * database `locktest` on 127.0.0.1 (env overrides PGHOST/PGPORT/PGUSER/PGPASSWORD and
 * MYSQL_HOST/MYSQL_PORT/MYSQL_USER/MYSQL_PASSWORD), with `poolSize` (default 10) as the pool's
 * maximum (pg `max`, mysql2 `connectionLimit`); postgres only: `applicationName` is sent as
 * `application_name`, which killConnections() can target. For sqlite: better-sqlite3 on
 * `sqliteFile`, or else on a file in a fresh temp dir, whose removal is then the non-enumerable
 * `cleanup()` of the result (call it after `destroy()`; the dir is also removed at process exit).
 * TypeORM opens a single connection for sqlite: `poolSize` does not apply.
 */
export function dataSourceOptions(
  kind: DbKind,
  opts: { poolSize?: number; sqliteFile?: string; applicationName?: string } = {},
): TestDataSourceOptions {
  const poolSize = opts.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1) {
    throw new Error(`poolSize must be a positive integer, got ${poolSize}`);
  }
  switch (kind) {
    case 'postgres': {
      const { host, port, user, password } = postgresSettings();
      return {
        type: 'postgres',
        host,
        port,
        username: user,
        ...(password === undefined ? {} : { password }),
        database: TEST_DATABASE,
        poolSize,
        ...(opts.applicationName === undefined
          ? {}
          : { extra: { application_name: opts.applicationName } }),
      };
    }
    case 'mariadb': {
      const { host, port, user, password } = mariadbSettings();
      return {
        type: 'mariadb',
        host,
        port,
        username: user,
        password,
        database: TEST_DATABASE,
        poolSize,
      };
    }
    case 'sqlite': {
      if (opts.sqliteFile !== undefined)
        return { type: 'better-sqlite3', database: opts.sqliteFile };
      const temp = tempSqliteFile();
      const options: TestDataSourceOptions = { type: 'better-sqlite3', database: temp.file };
      Object.defineProperty(options, 'cleanup', { value: temp.cleanup, enumerable: false });
      return options;
    }
  }
}

/**
 * A path for an SQLite database file in a fresh temp dir (the file itself does not exist yet).
 * `cleanup()` removes the dir with the file and its -wal/-journal companions; the dir is also
 * removed when the process exits, should cleanup() not be called.
 */
export function tempSqliteFile(): { file: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'ndl-sqlite-'));
  trackDir(dir, true);
  let cleaned = false;
  return {
    file: join(dir, 'locks.sqlite'),
    cleanup(): void {
      if (cleaned) return;
      cleaned = true;
      rmSync(dir, { recursive: true, force: true });
      trackDir(dir, false);
    },
  };
}

/** A table of its own for one test, on the test database of `kind` (see scratchTable). */
export interface ScratchTable {
  readonly kind: DbKind;
  /** A unique table name (uniqueTableName). */
  readonly name: string;
  /** sqlite only: the database file, in a fresh temp dir (tempSqliteFile). */
  readonly sqliteFile?: string;
  /** dataSourceOptions() for this table's database: on sqlite, its file. */
  dataSourceOptions(opts?: { poolSize?: number; applicationName?: string }): TestDataSourceOptions;
  /** Drops the table and, on sqlite, removes the temp dir (even when the drop fails). */
  drop(): Promise<void>;
}

/**
 * A unique table name on the test database of `kind`, and on sqlite a temp file to hold it: what
 * a test creates its lock table in, so that two test files running at once never share one.
 */
export function scratchTable(kind: DbKind, prefix?: string): ScratchTable {
  const name = uniqueTableName(prefix);
  const sqlite = kind === 'sqlite' ? tempSqliteFile() : undefined;
  return {
    kind,
    name,
    ...(sqlite ? { sqliteFile: sqlite.file } : {}),
    dataSourceOptions: (opts = {}) =>
      dataSourceOptions(kind, sqlite ? { ...opts, sqliteFile: sqlite.file } : opts),
    drop: async () => {
      try {
        await dropTable(kind, name, sqlite?.file);
      } finally {
        sqlite?.cleanup();
      }
    },
  };
}

/**
 * Kills, from the server side, connections to the test database `locktest` (never the admin
 * connection doing it), like an administrator or a failover would: postgres
 * `pg_terminate_backend(pid, 5000)` (waits until each backend has exited), mariadb
 * `KILL <id>` (then waits until the ids left PROCESSLIST). Filters combine with AND:
 * `applicationName` (postgres only: the `application_name`) or `ids` (postgres backend pids from
 * `pg_backend_pid()`, mariadb ids from `CONNECTION_ID()`). There is no "kill them all": Jest runs
 * two files at a time, so a fault strikes only its own connections (an application name, a
 * createMariadbUser login). Returns how many were killed.
 */
export async function killConnections(
  kind: 'postgres' | 'mariadb',
  filter: { applicationName?: string; ids?: readonly number[] },
): Promise<number> {
  const { applicationName, ids } = filter;
  if (applicationName === undefined && ids === undefined) {
    throw new Error('killConnections: give applicationName or ids');
  }
  if (ids?.some((id) => !Number.isSafeInteger(id) || id <= 0)) {
    throw new Error(`killConnections: ids must be positive integers, got ${ids.join(', ')}`);
  }
  if (ids?.length === 0) return 0;

  if (kind === 'postgres') {
    return withPostgres(async (client) => {
      const result = await client.query<{ killed: boolean }>(
        `SELECT pg_terminate_backend(pid, ${KILL_WAIT_MS}) AS killed
           FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
            AND ($2::text IS NULL OR application_name = $2::text)
            AND ($3::int[] IS NULL OR pid = ANY($3::int[]))`,
        [TEST_DATABASE, applicationName ?? null, ids ?? null],
      );
      return result.rows.filter((row) => row.killed).length;
    });
  }

  if (applicationName !== undefined) {
    throw new Error('killConnections: MariaDB has no application name; filter by ids instead');
  }
  return withMariadb(async (connection) => {
    const candidates = await processIds(connection);
    const targets = ids === undefined ? candidates : candidates.filter((id) => ids.includes(id));
    const killed: number[] = [];
    for (const id of targets) {
      try {
        await connection.query(`KILL CONNECTION ${id}`);
        killed.push(id);
      } catch (error) {
        // ER_NO_SUCH_THREAD: it ended on its own meanwhile
        if ((error as { errno?: number }).errno !== 1094) throw error;
      }
    }
    const deadline = Date.now() + KILL_WAIT_MS;
    while (killed.length > 0 && Date.now() < deadline) {
      const left = await processIds(connection);
      if (!killed.some((id) => left.includes(id))) break;
      await sleep(20);
    }
    return killed.length;
  });
}

/** A throwaway MariaDB login with every right on the test database (see createMariadbUser). */
export interface MariadbUser {
  username: string;
  password: string;
  /** Kills, from the server side, every connection logged in as this user; returns how many. */
  kill(): Promise<number>;
  /** Drops the user (its open connections stay until they end). */
  drop(): Promise<void>;
}

/**
 * A throwaway MariaDB user with all rights on `locktest`: the connections of an app that logs
 * in as it are exactly the PROCESSLIST rows with that USER, whatever else runs on the server
 * (other test files run at the same time), so a fault can strike them and nothing else.
 */
export async function createMariadbUser(): Promise<MariadbUser> {
  const username = `ndl_test_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  await withMariadb(async (connection) => {
    await connection.query(`CREATE USER ?@'%' IDENTIFIED BY ?`, [username, password]);
    await connection.query(`GRANT ALL PRIVILEGES ON \`${TEST_DATABASE}\`.* TO ?@'%'`, [username]);
  });
  return {
    username,
    password,
    kill: async () => {
      const ids = await withMariadb(async (connection) => {
        const [rows] = await connection.query<RowDataPacket[]>(
          'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ?',
          [username],
        );
        return rows.map((row) => Number(row.id));
      });
      return killConnections('mariadb', { ids });
    },
    drop: async () => {
      await withMariadb((connection) => connection.query(`DROP USER IF EXISTS ?@'%'`, [username]));
    },
  };
}

/** Ids of the other connections to the test database (MariaDB). */
async function processIds(connection: Connection): Promise<number[]> {
  const [rows] = await connection.query<RowDataPacket[]>(
    'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
    [TEST_DATABASE],
  );
  return rows.map((row) => Number(row.id));
}

/**
 * Drops a table if it exists (test isolation with unique table names). sqlite needs the
 * database file; a file that does not exist has no table to drop.
 */
export async function dropTable(kind: DbKind, table: string, sqliteFile?: string): Promise<void> {
  assertIdentifier(table);
  switch (kind) {
    case 'postgres':
      await withPostgres((client) => client.query(`DROP TABLE IF EXISTS "${table}"`));
      return;
    case 'mariadb':
      await withMariadb((connection) => connection.query(`DROP TABLE IF EXISTS \`${table}\``));
      return;
    case 'sqlite': {
      if (sqliteFile === undefined) throw new Error('dropTable(sqlite) needs the database file');
      if (!existsSync(sqliteFile)) return;
      const Database = loadSqlite();
      const db = new Database(sqliteFile, { fileMustExist: true });
      try {
        db.exec(`DROP TABLE IF EXISTS "${table}"`);
      } finally {
        db.close();
      }
      return;
    }
  }
}

/** A unique, valid (unquoted on all three databases) table name, e.g. `lock_t_1f9c03ab`. */
export function uniqueTableName(prefix = 'lock_t'): string {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  assertIdentifier(name);
  return name;
}

function assertIdentifier(name: string): void {
  if (!IDENTIFIER.test(name) || name.length > MAX_IDENTIFIER_LENGTH) {
    throw new Error(
      `not a plain SQL identifier (letters, digits, _; at most ${MAX_IDENTIFIER_LENGTH}): ${name}`,
    );
  }
}
