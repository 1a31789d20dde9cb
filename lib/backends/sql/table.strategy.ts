import type { StoreLockInfo } from '../../core/contract/lock-backend';
import type { LeaseStrategy } from './sql-lock-strategy';
import { storedKey } from './sql-dialect';
import { affectedRows, type SqlDatabase } from './sql-database';

/**
 * `strategy: 'table'` (Postgres, MySQL/MariaDB, SQLite): a row per key with owner token,
 * expiry and fence. Take = one conditional UPDATE of a free or expired row that bumps the
 * fence; expiry is judged by the database server's clock (SQLite: the machine's monotonic
 * clock, see `SqlDialect.nowMs`); renew and release are conditioned on the owner token. Rows
 * are never deleted, so fences never restart. Waiting is the engine's polling with backoff.
 * `forceRelease` clears the row's owner: the stale holder's next renewal, conditioned on its
 * token, finds it gone.
 */
export class TableStrategy implements LeaseStrategy {
  readonly kind = 'lease';

  async take(db: SqlDatabase, key: string, token: string, ttlMs: number): Promise<number | null> {
    const { table, dialect } = db;
    const k = storedKey(key);
    const update =
      `UPDATE ${table} SET owner = ?, expires_at = ${dialect.nowMs} + ?, fence = fence + 1 ` +
      `WHERE lock_key = ? AND (owner IS NULL OR expires_at IS NULL OR expires_at <= ${dialect.nowMs} OR ${dialect.ownedInOtherBoot})`;
    // Postgres and SQLite return the new fence from the UPDATE itself; MySQL needs a SELECT.
    if (dialect.family !== 'mysql') {
      const result = await db.exec(`${update} RETURNING fence`, [dialect.owner(token), ttlMs, k]);
      return result.records.length === 1 ? Number(result.records[0].fence) : null;
    }
    const result = await db.exec(update, [dialect.owner(token), ttlMs, k]);
    if (affectedRows(result) !== 1) return null;
    const row = await db.exec(`SELECT fence FROM ${table} WHERE lock_key = ? AND owner = ?`, [
      k,
      dialect.owner(token),
    ]);
    // Gone already only if the lease ran out in between: not a usable grant.
    return row.records.length === 1 ? Number(row.records[0].fence) : null;
  }

  async renew(db: SqlDatabase, key: string, token: string, ttlMs: number): Promise<boolean> {
    const { table, dialect } = db;
    const result = await db.exec(
      `UPDATE ${table} SET expires_at = ${dialect.nowMs} + ? WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
      [ttlMs, storedKey(key), dialect.owner(token)],
    );
    return affectedRows(result) === 1;
  }

  async release(db: SqlDatabase, key: string, token: string): Promise<boolean> {
    const { table, dialect } = db;
    const result = await db.exec(
      `UPDATE ${table} SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
      [storedKey(key), dialect.owner(token)],
    );
    if (affectedRows(result) === 1) return true;
    // Ours but already expired (nobody took it): free it anyway, yet report it was not held.
    await db.exec(
      `UPDATE ${table} SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ?`,
      [storedKey(key), dialect.owner(token)],
    );
    return false;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    const result = await db.exec(
      `SELECT 1 AS held FROM ${db.table} WHERE lock_key = ? AND ${heldNow(db)}`,
      [storedKey(key)],
    );
    return result.records.length > 0;
  }

  async inspect(db: SqlDatabase, key: string): Promise<StoreLockInfo> {
    const result = await db.exec(
      `SELECT fence, CASE WHEN ${heldNow(db)} THEN expires_at - ${db.dialect.nowMs} END AS remaining FROM ${db.table} WHERE lock_key = ?`,
      [storedKey(key)],
    );
    const row = result.records[0];
    if (!row) return { held: false, fence: 0, holders: 0 }; // never taken: the first grant gets 1
    const fence = Number(row.fence);
    if (row.remaining === null || row.remaining === undefined) {
      return { held: false, fence, holders: 0 };
    }
    return { held: true, fence, remainingMs: Math.max(0, Number(row.remaining)), holders: 1 };
  }

  async forceRelease(db: SqlDatabase, key: string): Promise<boolean> {
    const result = await db.exec(
      `UPDATE ${db.table} SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND ${heldNow(db)}`,
      [storedKey(key)],
    );
    return affectedRows(result) === 1;
  }
}

/** SQL condition: the row is held by a lease that has not run out (judged by the lease clock). */
function heldNow({ dialect }: SqlDatabase): string {
  return `owner IS NOT NULL AND expires_at > ${dialect.nowMs} AND NOT (${dialect.ownedInOtherBoot})`;
}
