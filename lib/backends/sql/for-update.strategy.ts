import type { SessionStrategy } from './sql-lock-strategy';
import { storedKey } from './sql-dialect';
import type { SqlDatabase } from './sql-source';
import type { SqlRunner } from './typeorm-types';

/**
 * `strategy: 'for-update'` (Postgres, MariaDB): the pinned connection holds an open transaction
 * with `SELECT ... FOR UPDATE` on the key's row. Take without waiting = `NOWAIT`; with a wait,
 * the database's own lock wait (Postgres `lock_timeout`, MariaDB `WAIT n`), so waiters queue in
 * the database. Release = commit. If the connection dies, the database releases the lock.
 */
export class ForUpdateStrategy implements SessionStrategy {
  readonly kind = 'session';
  readonly locksKeyRow = true;
  readonly waitsInDatabase = true;

  async take(db: SqlDatabase, runner: SqlRunner, key: string, waitMs: number): Promise<boolean> {
    let held = false;
    try {
      await runner.startTransaction();
      const postgres = db.dialect.family === 'postgres';
      if (postgres) {
        // The lock lives in this transaction: a server-side idle-in-transaction timeout below
        // our lease would end it (and free the row) while we still believe we hold it.
        await runner.query(
          `SELECT set_config('idle_in_transaction_session_timeout', '0', true)`,
          [],
          true,
        );
      }
      let mode = 'NOWAIT';
      if (waitMs > 0 && postgres) {
        // Transaction-local: the pooled connection goes back with its default lock_timeout.
        await runner.query(
          `SELECT set_config('lock_timeout', $1, true)`,
          [`${Math.ceil(waitMs)}ms`],
          true,
        );
        mode = '';
      } else if (waitMs > 0) {
        mode = `WAIT ${Math.max(1, Math.floor(waitMs / 1_000))}`; // a computed integer, not input
      }
      held = await lockRow(db, runner, key, mode);
      return held;
    } finally {
      if (!held) await runner.rollbackTransaction().catch(() => undefined);
    }
  }

  async release(_db: SqlDatabase, runner: SqlRunner): Promise<boolean> {
    await runner.commitTransaction();
    return true;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    // A shared row lock that skips locked rows, in one autocommit statement: no row back (for
    // an existing row) means someone holds it FOR UPDATE. Shared locks do not conflict with
    // each other, so concurrent isLocked calls cannot see one another as holders.
    const mode =
      db.dialect.family === 'postgres'
        ? 'FOR KEY SHARE SKIP LOCKED'
        : 'LOCK IN SHARE MODE SKIP LOCKED';
    const free = await db.exec(`SELECT lock_key FROM ${db.table} WHERE lock_key = ? ${mode}`, [
      storedKey(key),
    ]);
    if (free.records.length > 0) return false;
    return db.rowExists(key);
  }
}

/** Locks the key's row in the open transaction: `true` when locked, `false` when busy. */
async function lockRow(
  db: SqlDatabase,
  runner: SqlRunner,
  key: string,
  mode: string,
): Promise<boolean> {
  const sql = `SELECT lock_key FROM ${db.table} WHERE lock_key = ? FOR UPDATE ${mode}`.trim();
  try {
    await runner.query(db.dialect.sql(sql), [storedKey(key)], true);
    return true;
  } catch (err) {
    if (isLockBusy(err)) return false;
    throw db.explain(err);
  }
}

/** "Row locked by someone else" errors: Postgres 55P03, MariaDB 1205, MySQL 3572 (NOWAIT). */
export function isLockBusy(err: unknown): boolean {
  const e = err as {
    code?: unknown;
    errno?: unknown;
    driverError?: { code?: unknown; errno?: unknown };
  } | null;
  const code = e?.code ?? e?.driverError?.code;
  const errno = e?.errno ?? e?.driverError?.errno;
  return (
    code === '55P03' ||
    errno === 1205 ||
    errno === 3572 ||
    code === 'ER_LOCK_WAIT_TIMEOUT' ||
    code === 'ER_LOCK_NOWAIT'
  );
}
