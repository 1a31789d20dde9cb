import { missingLayout } from './fence-counter';
import {
  BUCKET_ROW,
  bucketIndexOf,
  bucketKey,
  bucketsOfMetaText,
  KEY_ROW,
  META_KEY,
} from './fence-layout';
import { affectedRows, type SqlDatabase } from './sql-database';
import type { SqlResult } from './typeorm-types';

/*
 * Makes the fence buckets safe to draw from when a backend starts on a table (see
 * fence-layout.ts), and removes rows nothing needs any more.
 *
 * A change of `fenceBuckets` moves keys between buckets: every bucket is then raised to the
 * largest counter of all, and so is the floor new buckets are created at, so no key's next
 * fence can fall to or below one it was given before. Idempotent and safe when several
 * instances start at once: the raise runs in a transaction holding the layout row `FOR
 * UPDATE`, and a bucket is created reading the floor under a share lock, so no bucket is
 * created below a floor being raised (SQLite, one writer at a time: every write here only
 * raises values, so any interleaving ends in the same state).
 */

/** Rows read or deleted per statement. */
const CHUNK = 1_000;

/** Runs one statement (on the layout change's transaction, or a pooled connection). */
type Query = (sql: string, params: unknown[]) => Promise<SqlResult>;

/**
 * Creates the layout row if missing and moves the buckets to a changed bucket count. Returns the
 * floor: free key rows whose fence is at most that are no longer needed.
 */
export async function prepareFences(db: SqlDatabase): Promise<number> {
  const query: Query = (sql, params) => db.exec(sql, params);
  await db.exec(db.dialect.insertIgnore(db.table, ['lock_key', 'key_text', 'fence']), [
    META_KEY,
    db.fences.metaText,
    0,
  ]);
  const meta = await readMeta(db, query, false);
  if (bucketsOfMetaText(meta.text) === db.fences.buckets) return meta.floor;
  if (db.dialect.family === 'sqlite') return relayout(db, query, false);
  const runner = db.connection();
  try {
    await runner.startTransaction();
    try {
      const floor = await relayout(
        db,
        (sql, params) => runner.query(db.dialect.sql(sql), params, true),
        true,
      );
      await runner.commitTransaction();
      return floor;
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw db.explain(err);
    }
  } finally {
    await runner.release();
  }
}

/**
 * Moves the buckets to this backend's count: the floor and every bucket raised to the largest
 * counter, buckets past the count deleted. `lock`: hold the layout row `FOR UPDATE` (in the
 * caller's transaction). Returns the floor.
 */
async function relayout(db: SqlDatabase, query: Query, lock: boolean): Promise<number> {
  const { table, dialect } = db;
  const count = db.fences.buckets;
  const meta = await readMeta(db, query, lock);
  // Another instance may have moved them while this one waited for the layout row.
  if (bucketsOfMetaText(meta.text) === count) return meta.floor;
  const counters = await readBuckets(db, query);
  let floor = meta.floor;
  for (const value of counters.values()) floor = Math.max(floor, value);
  await query(
    `UPDATE ${table} SET fence = ${dialect.greatest('fence', '?')}, key_text = ? WHERE lock_key = ?`,
    [floor, db.fences.metaText, META_KEY],
  );
  await query(`UPDATE ${table} SET fence = ? WHERE ${BUCKET_ROW} AND fence < ?`, [floor, floor]);
  const obsolete = [...counters.keys()].filter((index) => index >= count).map(bucketKey);
  for (let i = 0; i < obsolete.length; i += CHUNK) {
    const chunk = obsolete.slice(i, i + CHUNK);
    await query(`DELETE FROM ${table} WHERE lock_key IN (${marks(chunk)})`, chunk);
  }
  return floor;
}

/** The layout row: its floor and text; it must exist (this module created it). */
async function readMeta(
  db: SqlDatabase,
  query: Query,
  lock: boolean,
): Promise<{ floor: number; text: unknown }> {
  const result = await query(
    `SELECT fence, key_text FROM ${db.table} WHERE lock_key = ?${lock ? ' FOR UPDATE' : ''}`,
    [META_KEY],
  );
  const row = result.records[0];
  if (!row) throw missingLayout(db);
  return { floor: Number(row.fence), text: row.key_text };
}

/** Every bucket row: index → counter. */
async function readBuckets(db: SqlDatabase, query: Query): Promise<Map<number, number>> {
  const result = await query(`SELECT lock_key, fence FROM ${db.table} WHERE ${BUCKET_ROW}`, []);
  const counters = new Map<number, number>();
  for (const row of result.records) {
    const index = bucketIndexOf(String(row.lock_key));
    if (index !== undefined) counters.set(index, Number(row.fence));
  }
  return counters;
}

/**
 * Deletes, in chunks, key rows no lock needs: rows without an owner whose fence is at most
 * `floor` (`for-update` and slot rows nobody has locked; rows locked right now are skipped,
 * never waited for), and leases that ran out (their bucket is above their fence: it was drawn
 * from it). Reserved rows (`~…`) are never touched. Stops early when `stopped()` says so.
 * Returns how many rows it deleted.
 */
export async function collectRows(
  db: SqlDatabase,
  floor: number,
  stopped: () => boolean,
): Promise<number> {
  const { table, dialect } = db;
  const candidates = `${KEY_ROW} AND ((owner IS NULL AND fence <= ?) OR (owner IS NOT NULL AND (${dialect.freeLease()})))`;
  let deleted = 0;
  while (!stopped()) {
    let n: number;
    if (dialect.family === 'mysql') {
      n = await collectMysqlChunk(db, candidates, floor);
    } else {
      const lock = dialect.family === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
      const result = await db.exec(
        `DELETE FROM ${table} WHERE lock_key IN (SELECT lock_key FROM ${table} WHERE ${candidates} LIMIT ${CHUNK}${lock})`,
        [floor],
      );
      n = affectedRows(result);
    }
    deleted += n;
    if (n < CHUNK) break;
  }
  return deleted;
}

/**
 * MariaDB/MySQL cannot skip locked rows in a DELETE: the chunk is locked (skipping locked rows)
 * and then deleted in one READ COMMITTED transaction, which locks only the rows it returns.
 */
async function collectMysqlChunk(
  db: SqlDatabase,
  candidates: string,
  floor: number,
): Promise<number> {
  const runner = db.connection();
  try {
    await runner.startTransaction('READ COMMITTED');
    try {
      const rows = await runner.query(
        `SELECT lock_key FROM ${db.table} WHERE ${candidates} LIMIT ${CHUNK} FOR UPDATE SKIP LOCKED`,
        [floor],
        true,
      );
      const keys = rows.records.map((row) => String(row.lock_key));
      if (keys.length > 0) {
        await runner.query(
          `DELETE FROM ${db.table} WHERE lock_key IN (${marks(keys)})`,
          keys,
          true,
        );
      }
      await runner.commitTransaction();
      return keys.length;
    } catch (err) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw db.explain(err);
    }
  } finally {
    await runner.release();
  }
}

/** `?, ?, …` for a list of parameters. */
function marks(values: readonly unknown[]): string {
  return values.map(() => '?').join(', ');
}
