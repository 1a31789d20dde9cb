import { createHash } from 'node:crypto';
import { connectionAnswers } from './pinned-connections';
import type { SessionStrategy } from './sql-lock-strategy';
import { truthy, type SqlDatabase } from './sql-source';
import type { SqlRunner } from './typeorm-types';

/**
 * `strategy: 'advisory'`: Postgres `pg_try_advisory_lock` on a 64-bit hash of the key, or
 * MariaDB/MySQL `GET_LOCK` on a hashed name (<= 64 characters), taken and released on the same
 * pinned connection (an unlock sent on another pooled connection would silently do nothing).
 * Hashing means two different keys can collide (2^-64 per pair on Postgres, 2^-240 on MariaDB):
 * a collision makes them exclude each other, never lets two holders in. Session advisory
 * locks do not survive PgBouncer transaction pooling: connect directly or in session mode.
 * Waiting is the engine's polling with backoff.
 */
export class AdvisoryStrategy implements SessionStrategy {
  readonly kind = 'session';
  readonly locksKeyRow = false;
  readonly waitsInDatabase = false;

  take(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    return callOn(db, runner, key, 'pg_try_advisory_lock', 'GET_LOCK(?, 0)');
  }

  /**
   * Postgres: the lock lives with the session, so the connection answering is proof enough;
   * MariaDB can say who holds the name, so ask.
   */
  async probe(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') return connectionAnswers(runner);
    const result = await runner.query(
      'SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS mine',
      [advisoryLockName(key)],
      true,
    );
    return truthy(result.records[0]?.mine);
  }

  release(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    return callOn(db, runner, key, 'pg_advisory_unlock', 'RELEASE_LOCK(?)');
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      const id = BigInt.asUintN(64, BigInt(advisoryKey64(key)));
      const result = await db.exec(
        `SELECT 1 AS held FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = ? AND objid = ? AND objsubid = 1`,
        [Number(id >> 32n), Number(id & 0xffffffffn)],
      );
      return result.records.length > 0;
    }
    const result = await db.exec('SELECT IS_USED_LOCK(?) IS NOT NULL AS used', [
      advisoryLockName(key),
    ]);
    return truthy(result.records[0]?.used);
  }
}

/**
 * Calls an advisory-lock function for `key` on `runner`: `postgres(key64)` on Postgres, the
 * `mysql` expression (its `?` the lock name) on MariaDB/MySQL. Its result as a boolean.
 */
async function callOn(
  db: SqlDatabase,
  runner: SqlRunner,
  key: string,
  postgres: string,
  mysql: string,
): Promise<boolean> {
  const result =
    db.dialect.family === 'postgres'
      ? await runner.query(`SELECT ${postgres}($1::bigint) AS ok`, [advisoryKey64(key)], true)
      : await runner.query(`SELECT ${mysql} AS ok`, [advisoryLockName(key)], true);
  return truthy(result.records[0]?.ok);
}

/** Signed 64-bit advisory key for Postgres (first 8 bytes of SHA-256), as a decimal string. */
export function advisoryKey64(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest().readBigInt64BE(0).toString();
}

/** MariaDB/MySQL GET_LOCK name: at most 64 characters, from SHA-256. */
export function advisoryLockName(key: string): string {
  return `dl:${createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 60)}`;
}
