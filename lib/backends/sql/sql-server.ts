import type { SqlFamily } from './sql-dialect';
import type { SqlDataSource } from './typeorm-types';

/**
 * What the database server says about itself, read once when the backend first opens it: the
 * declared TypeORM type can be wrong (a MariaDB server is often reached with `type: 'mysql'`),
 * the server cannot.
 */
export interface SqlServer {
  /** A MariaDB server (`SELECT VERSION()` says so), whatever TypeORM type reached it. */
  readonly mariadb: boolean;
  /** PostgreSQL's `server_version_num` (150020 for 15.20); 0 on other databases. */
  readonly pgVersion: number;
  /**
   * MariaDB/MySQL: the connection's database (`DATABASE()`), where the unqualified lock table
   * lives; names of server-wide user-level locks include it. Empty elsewhere.
   */
  readonly database: string;
}

/** Nothing to ask: SQLite runs in the process. */
const SQLITE: SqlServer = { mariadb: false, pgVersion: 0, database: '' };

/** Asks the server behind an initialized DataSource what it is (one statement). */
export async function readServer(dataSource: SqlDataSource, family: SqlFamily): Promise<SqlServer> {
  if (family === 'sqlite') return SQLITE;
  const runner = dataSource.createQueryRunner();
  try {
    if (family === 'postgres') {
      const result = await runner.query(
        `SELECT current_setting('server_version_num') AS num`,
        [],
        true,
      );
      return { mariadb: false, pgVersion: Number(result.records[0]?.num) || 0, database: '' };
    }
    const result = await runner.query('SELECT VERSION() AS version, DATABASE() AS db', [], true);
    const row = result.records[0];
    return {
      mariadb: isMariadbVersion(String(row?.version)),
      pgVersion: 0,
      database: String(row?.db ?? ''),
    };
  } finally {
    await runner.release();
  }
}

/** Whether a `VERSION()` string is MariaDB's (`10.11.6-MariaDB-0+deb12u1`, `11.4.2-MariaDB`). */
export function isMariadbVersion(version: string): boolean {
  return /mariadb/i.test(version);
}

/** PostgreSQL 14 added `idle_session_timeout` and `pg_terminate_backend(pid, timeout)`. */
export function pgHasIdleSessionTimeout(server: SqlServer): boolean {
  return server.pgVersion >= 140_000;
}
