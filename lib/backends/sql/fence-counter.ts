import type { SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';

/*
 * The fence counter of a session-bound lock: a row of its own in the lock table (beside the
 * key's row, which a `for-update` holder keeps locked), bumped in autocommit on a pooled
 * connection — never on the holder's: a rolled-back transaction must never hand the same fence
 * out twice. Rows are never deleted, so fences never restart.
 */

/** The stored key of `key`'s counter row. */
function counterKey(key: string): string {
  return storedKey(`\u0000fence\u0000${key}`);
}

/** Draws the next fence for `key`. */
export async function nextFence(db: SqlDatabase, key: string): Promise<number> {
  const { dialect, table } = db;
  const counter = counterKey(key);
  const label = `fence of ${key.slice(0, 200)}`;
  if (dialect.family === 'postgres') {
    const result = await db.exec(
      `INSERT INTO ${table} (lock_key, key_text, fence) VALUES (?, ?, 1) ON CONFLICT (lock_key) DO UPDATE SET fence = ${table}.fence + 1 RETURNING fence`,
      [counter, label],
    );
    return Number(result.records[0].fence);
  }
  // MySQL/MariaDB: LAST_INSERT_ID(expr) hands the new value back on the same connection.
  const runner = db.connection();
  try {
    await runner.query(
      `INSERT INTO ${table} (lock_key, key_text, fence) VALUES (?, ?, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)`,
      [counter, label],
      true,
    );
    const result = await runner.query('SELECT LAST_INSERT_ID() AS fence', [], true);
    return Number(result.records[0].fence);
  } catch (err) {
    throw db.explain(err);
  } finally {
    await runner.release();
  }
}

/**
 * The last fence drawn for `key` (0 when none was): the holder's while the key is held (once
 * its grant completed), else the one the next grant will exceed.
 */
export async function lastFence(db: SqlDatabase, key: string): Promise<number> {
  const result = await db.exec(`SELECT fence FROM ${db.table} WHERE lock_key = ?`, [
    counterKey(key),
  ]);
  return result.records.length === 0 ? 0 : Number(result.records[0].fence);
}
