import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import type { SqlDatabase } from './sql-database';
import { pgHasIdleSessionTimeout } from './sql-server';
import type { SqlRunner } from './typeorm-types';

/*
 * The server side of a session lock's connection: how long the server keeps a session it no
 * longer hears from (the `sessionTimeout` bound), which session a connection is, and ending a
 * session from another connection (an aborted database wait, `forceRelease`).
 */

/** Default `sessionTimeout`, ms: the default ttl, so a silent holder blocks others as long on every backend. */
export const DEFAULT_SESSION_TIMEOUT_MS = 30_000;
/** Smallest `sessionTimeout`, ms: MariaDB counts `wait_timeout` in whole seconds. */
export const MIN_SESSION_TIMEOUT_MS = 1_000;
/** How long `pg_terminate_backend` waits for the session to be gone (PostgreSQL 14+), ms. */
const PG_TERMINATE_WAIT_MS = 2_000;
/** Longest wait, ms, for a killed MariaDB session to let its locks go (as PG_TERMINATE_WAIT_MS). */
const KILL_SETTLE_MS = 2_000;
/** MariaDB/MySQL: `KILL` of a thread that no longer exists. */
const ER_NO_SUCH_THREAD = 1094;

/** A PostgreSQL duration setting for `ms` (`idle_in_transaction_session_timeout` and the like). */
export function pgMilliseconds(ms: number): string {
  return `${Math.ceil(ms)}ms`;
}

/** Longest single MariaDB/MySQL lock wait we ask for, s (a year: "until granted or ended" in practice). */
export const MAX_MYSQL_WAIT_S = 31_536_000;

/** MariaDB/MySQL `wait_timeout` for a bound of `ms`: whole seconds, rounded up (never shorter). */
export function mysqlWaitTimeout(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1_000));
}

/**
 * MariaDB/MySQL: bounds the session of `runner` on the server: `wait_timeout` (how long the
 * server waits for the next statement, in a transaction or not) set to `sessionTimeoutMs`. Given
 * `lockWaitMs` (a `for-update` take), also `innodb_lock_wait_timeout` (how long any of its
 * statements waits for a row lock: whole seconds, 0 = not at all) and READ COMMITTED for its
 * transactions: InnoDB's default REPEATABLE READ makes a locking read that finds no row, or a
 * deleted one, lock the gap around it until the transaction ends, and such a gap stops other
 * keys' rows from being made meanwhile. One statement; undone by {@link MYSQL_RESTORE_SESSION}.
 */
export async function boundMysqlSession(
  runner: SqlRunner,
  sessionTimeoutMs: number,
  lockWaitMs?: number,
): Promise<void> {
  if (lockWaitMs === undefined) {
    await runner.query('SET SESSION wait_timeout = ?', [mysqlWaitTimeout(sessionTimeoutMs)], true);
    return;
  }
  await runner.query(
    "SET SESSION wait_timeout = ?, SESSION innodb_lock_wait_timeout = ?, SESSION tx_isolation = 'READ-COMMITTED'",
    [
      mysqlWaitTimeout(sessionTimeoutMs),
      lockWaitMs <= 0 ? 0 : Math.min(MAX_MYSQL_WAIT_S, Math.ceil(lockWaitMs / 1_000)),
    ],
    true,
  );
}

/**
 * MariaDB/MySQL: the assignments that give a pooled connection its usual `wait_timeout`,
 * `innodb_lock_wait_timeout` and isolation level back (a transaction under way keeps the level
 * it started with).
 */
export const MYSQL_RESTORE_SESSION =
  'SESSION wait_timeout = DEFAULT, SESSION innodb_lock_wait_timeout = DEFAULT, SESSION tx_isolation = DEFAULT';

/**
 * The server's id of the session `runner` is connected to (PostgreSQL backend pid, MariaDB/MySQL
 * thread id), known to the driver without a round trip; `undefined` if it is not connected.
 */
export function sessionIdOf(runner: SqlRunner): number | undefined {
  const connection = runner.databaseConnection as
    { processID?: unknown; threadId?: unknown } | undefined;
  const id = connection?.processID ?? connection?.threadId;
  return typeof id === 'number' && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

/**
 * `pg_terminate_backend(<pidSql>)`, waiting until the session is gone where PostgreSQL can
 * (14+): whatever it held is then free when the statement returns.
 */
export function pgTerminate(db: SqlDatabase, pidSql: string): string {
  return pgHasIdleSessionTimeout(db.server)
    ? `pg_terminate_backend(${pidSql}, ${PG_TERMINATE_WAIT_MS})`
    : `pg_terminate_backend(${pidSql})`;
}

/**
 * Ends session `id` of this database from a pooled connection: everything it held (a lock it
 * was just granted included) is freed by the server, and the pool drops the dead connection.
 * Used on our own waiting connection when its caller aborts: its pending statement fails as
 * the session ends, which is all the waiting there is to do, so this does not wait for it.
 * `true` when it was ended.
 */
export async function endSession(db: SqlDatabase, id: number): Promise<boolean> {
  if (db.dialect.family === 'postgres') {
    const result = await db.exec(
      `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE pid = ? AND datname = current_database()`,
      [id],
    );
    return result.records.length > 0;
  }
  return killThread(db, 'KILL CONNECTION ?', [id]);
}

/**
 * MariaDB/MySQL: ends the session holding the user-level lock `name` (`GET_LOCK`), looked up
 * and killed by the server in one statement, then waits (bounded) until the server has let the
 * lock go: `KILL` returns before the killed session's locks are freed, and a caller told
 * "freed" must find the key free. `false` when nobody holds it.
 */
export async function killHolderOf(db: SqlDatabase, name: string): Promise<boolean> {
  const holder = await usedBy(db, name);
  if (holder === null) return false;
  if (!(await killThread(db, 'KILL CONNECTION IS_USED_LOCK(?)', [name]))) return false;
  const deadline = monotonicNow() + KILL_SETTLE_MS;
  while ((await usedBy(db, name)) === holder && monotonicNow() < deadline) await sleep(2);
  return true;
}

/** The connection id holding user-level lock `name`, or `null`. */
async function usedBy(db: SqlDatabase, name: string): Promise<number | null> {
  const result = await db.exec('SELECT IS_USED_LOCK(?) AS holder', [name]);
  const holder = result.records[0]?.holder;
  return holder === null || holder === undefined ? null : Number(holder);
}

/** Runs a `KILL`; a thread that is not there (anymore) is `false`. */
async function killThread(db: SqlDatabase, sql: string, params: unknown[]): Promise<boolean> {
  try {
    await db.exec(sql, params);
    return true;
  } catch (err) {
    if ((err as { errno?: unknown } | null)?.errno === ER_NO_SUCH_THREAD) return false;
    throw err;
  }
}
