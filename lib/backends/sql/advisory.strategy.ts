import { createHash } from 'node:crypto';
import { connectionAnswers } from './pinned-connections';
import type { SessionStrategy } from './sql-lock-strategy';
import { truthy, type SqlDatabase } from './sql-database';
import { pgHasIdleSessionTimeout } from './sql-server';
import {
  boundMysqlSession,
  killHolderOf,
  MYSQL_RESTORE_SESSION,
  pgMilliseconds,
  pgTerminate,
} from './sql-sessions';
import type { SqlRunner } from './typeorm-types';

/** Postgres: the session's `idle_session_timeout` back to what `RESET` would give it. */
const PG_RESTORE_IDLE_TIMEOUT = `set_config('idle_session_timeout', (SELECT reset_val FROM pg_settings WHERE name = 'idle_session_timeout'), false)`;

/**
 * `strategy: 'advisory'`: Postgres `pg_try_advisory_lock` on a 64-bit hash of the key, or
 * MariaDB/MySQL `GET_LOCK` on a hashed name (<= 64 characters), taken and released on the same
 * pinned connection (an unlock sent on another pooled connection would silently do nothing).
 * Hashing means two different keys can collide (2^-64 per pair on Postgres, 2^-240 on MariaDB):
 * a collision makes them exclude each other, never lets two holders in. Session advisory
 * locks do not survive PgBouncer transaction pooling: connect directly or in session mode.
 * Waiting is the engine's polling with backoff.
 *
 * The server ends a holder it stops hearing from after `sessionTimeoutMs`: Postgres 14+
 * `idle_session_timeout`, set in the very statement that takes the lock (and only if it does),
 * MariaDB/MySQL `wait_timeout`, set before it; both are given back at release.
 */
export class AdvisoryStrategy implements SessionStrategy {
  readonly kind = 'session';
  readonly waitsInDatabase = false;

  constructor(private readonly sessionTimeoutMs: number) {}

  async take(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      if (!pgHasIdleSessionTimeout(db.server)) {
        return query(runner, `SELECT pg_try_advisory_lock($1::bigint) AS ok`, [advisoryKey64(key)]);
      }
      // One statement: the bound is set exactly when the lock is taken, so a failed try leaves
      // the pooled connection as it was, and a holder that never hears back is bounded too.
      const result = await runner.query(
        `SELECT CASE WHEN pg_try_advisory_lock($1::bigint) THEN set_config('idle_session_timeout', $2, false) END AS bound`,
        [advisoryKey64(key), pgMilliseconds(this.sessionTimeoutMs)],
        true,
      );
      return result.records[0]?.bound != null;
    }
    await boundMysqlSession(runner, this.sessionTimeoutMs);
    let taken = false;
    try {
      taken = await query(runner, 'SELECT GET_LOCK(?, 0) AS ok', [advisoryLockName(key)]);
      return taken;
    } finally {
      if (!taken) await runner.query(`SET ${MYSQL_RESTORE_SESSION}`, [], true);
    }
  }

  /**
   * Postgres: the lock lives with the session, so the connection answering is proof enough;
   * MariaDB can say who holds the name, so ask.
   */
  async probe(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') return connectionAnswers(runner);
    return query(runner, 'SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS ok', [advisoryLockName(key)]);
  }

  async release(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      const restore = pgHasIdleSessionTimeout(db.server) ? `, ${PG_RESTORE_IDLE_TIMEOUT}` : '';
      return query(runner, `SELECT pg_advisory_unlock($1::bigint) AS ok${restore}`, [
        advisoryKey64(key),
      ]);
    }
    const released = await query(runner, 'SELECT RELEASE_LOCK(?) AS ok', [advisoryLockName(key)]);
    await runner.query(`SET ${MYSQL_RESTORE_SESSION}`, [], true);
    return released;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      const result = await db.exec(`SELECT 1 AS held FROM pg_locks WHERE ${PG_LOCK_OF}`, [
        ...pgLockIds(key),
      ]);
      return result.records.length > 0;
    }
    const result = await db.exec('SELECT IS_USED_LOCK(?) IS NOT NULL AS used', [
      advisoryLockName(key),
    ]);
    return truthy(result.records[0]?.used);
  }

  /** Ends the session holding the lock, looked up and ended by the server in one statement. */
  async forceRelease(db: SqlDatabase, key: string): Promise<boolean> {
    if (db.dialect.family !== 'postgres') return killHolderOf(db, advisoryLockName(key));
    const result = await db.exec(
      `SELECT ${pgTerminate(db, 'pid')} AS ended FROM pg_locks WHERE ${PG_LOCK_OF}`,
      [...pgLockIds(key)],
    );
    return result.records.length > 0;
  }
}

/** Runs `sql` on `runner`; its first row's `ok` as a boolean. */
async function query(runner: SqlRunner, sql: string, params: unknown[]): Promise<boolean> {
  const result = await runner.query(sql, params, true);
  return truthy(result.records[0]?.ok);
}

/**
 * The `pg_locks` condition for the granted session advisory lock of a key in this database
 * (advisory locks are per database: the same number elsewhere is another lock); its two
 * parameters are {@link pgLockIds}.
 */
const PG_LOCK_OF =
  `locktype = 'advisory' AND granted AND objsubid = 1 AND classid = ? AND objid = ? ` +
  `AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

/** `classid` and `objid` of `key`'s advisory lock in `pg_locks` (the 64-bit id's two halves). */
function pgLockIds(key: string): [number, number] {
  const id = BigInt.asUintN(64, BigInt(advisoryKey64(key)));
  return [Number(id >> 32n), Number(id & 0xffffffffn)];
}

/** Signed 64-bit advisory key for Postgres (first 8 bytes of SHA-256), as a decimal string. */
export function advisoryKey64(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest().readBigInt64BE(0).toString();
}

/** MariaDB/MySQL GET_LOCK name: at most 64 characters, from SHA-256. */
export function advisoryLockName(key: string): string {
  return `dl:${createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 60)}`;
}
