import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
} from '../../core/contract/lock-backend';
import { storedKey } from './sql-dialect';
import { affectedRows, type SqlSource } from './sql-source';

/**
 * `strategy: 'table'` (Postgres, MySQL/MariaDB, SQLite): a row per key with owner token,
 * expiry and fence. Acquire takes a free or expired row in one conditional UPDATE that bumps
 * the fence (inserting the row first if the key is new); expiry is judged by the database
 * server's clock (SQLite: the machine's monotonic clock, see `SqlDialect.nowMs`); extend and
 * release are conditioned on the owner token. Rows are never deleted, so fences never restart. Waiting is the core's polling with backoff and jitter.
 */
export class TableLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'poll',
  };
  private readonly returning: boolean;

  constructor(private readonly source: SqlSource) {
    // Postgres and SQLite return the new fence from the UPDATE itself; MySQL needs a SELECT.
    this.returning = source.dialect.family !== 'mysql';
  }

  async tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    const k = storedKey(key);
    let grant = await this.takeOver(k, token, ttlMs);
    if (grant === undefined) {
      // A key never seen: create its (free) row, then take it like any other.
      await this.source.exec(
        this.source.dialect.insertIgnore(this.source.table, ['lock_key', 'key_text', 'fence']),
        [k, key, 0],
      );
      grant = await this.takeOver(k, token, ttlMs);
    }
    return grant ?? null;
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const { table, dialect } = this.source;
    const result = await this.source.exec(
      `UPDATE ${table} SET expires_at = ${dialect.nowMs} + ? WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
      [ttlMs, storedKey(key), dialect.owner(token)],
    );
    return affectedRows(result) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    const { table, dialect } = this.source;
    const result = await this.source.exec(
      `UPDATE ${table} SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
      [storedKey(key), dialect.owner(token)],
    );
    if (affectedRows(result) === 1) return true;
    // Ours but already expired (nobody took it): free it anyway, yet report it was not held.
    await this.source.exec(
      `UPDATE ${table} SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ?`,
      [storedKey(key), dialect.owner(token)],
    );
    return false;
  }

  async isLocked(key: string): Promise<boolean> {
    const { table, dialect } = this.source;
    const result = await this.source.exec(
      `SELECT 1 AS held FROM ${table} WHERE lock_key = ? AND owner IS NOT NULL AND expires_at > ${dialect.nowMs} AND NOT (${dialect.ownedInOtherBoot})`,
      [storedKey(key)],
    );
    return result.records.length > 0;
  }

  ping(): Promise<void> {
    return this.source.ping();
  }

  async close(): Promise<void> {
    await this.source.close();
  }

  /**
   * The one conditional statement: take the row if it is free or expired, bump its fence.
   * Resolves the grant, `null` when held by someone else, `undefined` when the row is missing.
   */
  private async takeOver(
    k: string,
    token: string,
    ttlMs: number,
  ): Promise<LockGrant | null | undefined> {
    const { table, dialect } = this.source;
    const update =
      `UPDATE ${table} SET owner = ?, expires_at = ${dialect.nowMs} + ?, fence = fence + 1 ` +
      `WHERE lock_key = ? AND (owner IS NULL OR expires_at IS NULL OR expires_at <= ${dialect.nowMs} OR ${dialect.ownedInOtherBoot})`;
    const result = await this.source.exec(this.returning ? `${update} RETURNING fence` : update, [
      dialect.owner(token),
      ttlMs,
      k,
    ]);
    if (this.returning && result.records.length === 1)
      return { fence: Number(result.records[0].fence) };
    if (!this.returning && affectedRows(result) === 1) {
      const row = await this.source.exec(
        `SELECT fence FROM ${table} WHERE lock_key = ? AND owner = ?`,
        [k, dialect.owner(token)],
      );
      // Gone already only if the lease ran out in between: not a usable grant.
      return row.records.length === 1 ? { fence: Number(row.records[0].fence) } : null;
    }
    const exists = await this.source.exec(`SELECT 1 AS present FROM ${table} WHERE lock_key = ?`, [
      k,
    ]);
    return exists.records.length === 1 ? null : undefined;
  }
}
