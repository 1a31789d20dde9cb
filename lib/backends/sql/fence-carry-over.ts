import { missingLayout } from './fence-counter';
import {
  BUCKET_ROW,
  bucketIndexOf,
  bucketKey,
  bucketOfStoredKey,
  bucketsOfMetaText,
  bucketText,
  KEY_ROW,
  META_KEY,
} from './fence-layout';
import { affectedRows, type SqlDatabase } from './sql-database';
import type { SqlResult } from './typeorm-types';

/*
 * Makes the fence buckets safe to draw from when a backend starts on a table (see
 * fence-layout.ts), and removes rows nothing needs any more.
 *
 * Earlier versions kept a counter row per key (`\0fence\0<key>`, for the session strategies)
 * and never deleted a `table` key row. Those rows' stored keys are digests, so they cannot be
 * mapped back to their key's bucket: every bucket is raised to at least the largest fence among
 * them (M), and so is the floor new buckets are created at. A row still held (an owner whose
 * lease runs) is a key row, so it maps to its own bucket, which is raised above its fence. A
 * change of `fenceBuckets` moves keys between buckets, so then every bucket is raised to the
 * largest counter of all. Rows no longer needed are deleted afterwards, in the background.
 *
 * Idempotent and safe when several instances start at once: the raise runs in a transaction
 * holding the layout row `FOR UPDATE`, and a bucket is created reading the floor under a share
 * lock, so no bucket is created below a floor being raised (SQLite, one writer at a time: every
 * write here only raises values, so any interleaving ends in the same state).
 */

/** Rows read or deleted per statement. */
const CHUNK = 1_000;

/** Runs one statement (on the carry-over's transaction, or a pooled connection). */
type Query = (sql: string, params: unknown[]) => Promise<SqlResult>;

/**
 * Creates the layout row if missing and carries fences over when needed (first start on a
 * table of an earlier version, rows of an earlier version left behind, a changed bucket count).
 * Returns the floor: rows of keys not held whose fence is at most that are no longer needed.
 */
export async function prepareFences(db: SqlDatabase): Promise<number> {
  const query: Query = (sql, params) => db.exec(sql, params);
  // A new layout row says "0 buckets" until a carry-over has run over the table.
  await db.exec(db.dialect.insertIgnore(db.table, ['lock_key', 'key_text', 'fence']), [
    META_KEY,
    `${db.fences.metaText.replace(/buckets=\d+$/, 'buckets=0')}`,
    0,
  ]);
  const floor = await needsCarryOver(db, query);
  if (floor !== undefined) return floor;
  if (db.dialect.family === 'sqlite') return carryOver(db, query, false);
  const runner = db.connection();
  try {
    await runner.startTransaction();
    try {
      const floor = await carryOver(
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
 * A read-only look (no lock taken): the floor when nothing needs carrying over, `undefined` when
 * {@link carryOver} must run.
 */
async function needsCarryOver(db: SqlDatabase, query: Query): Promise<number | undefined> {
  const meta = await readMeta(db, query, false);
  if (bucketsOfMetaText(meta.text) !== db.fences.buckets) return undefined;
  if ((await legacyMax(db, query)) > meta.floor) return undefined;
  const counters = await readBuckets(db, query);
  const raises = await heldRaises(db, query, meta.floor, counters);
  return raises.size > 0 ? undefined : meta.floor;
}

/** The carry-over itself; `lock`: hold the layout row `FOR UPDATE` (in the caller's transaction). */
async function carryOver(db: SqlDatabase, query: Query, lock: boolean): Promise<number> {
  const { table, dialect } = db;
  const count = db.fences.buckets;
  const meta = await readMeta(db, query, lock);
  const counters = await readBuckets(db, query);
  const relayout = bucketsOfMetaText(meta.text) !== count;
  let floor = Math.max(meta.floor, await legacyMax(db, query));
  if (relayout) for (const value of counters.values()) floor = Math.max(floor, value);
  if (floor > meta.floor || relayout) {
    await query(
      `UPDATE ${table} SET fence = ${dialect.greatest('fence', '?')}, key_text = ? WHERE lock_key = ?`,
      [floor, db.fences.metaText, META_KEY],
    );
    await query(`UPDATE ${table} SET fence = ? WHERE ${BUCKET_ROW} AND fence < ?`, [floor, floor]);
    for (const [index, value] of counters) counters.set(index, Math.max(value, floor));
    const obsolete = [...counters.keys()].filter((index) => index >= count).map(bucketKey);
    for (let i = 0; i < obsolete.length; i += CHUNK) {
      const chunk = obsolete.slice(i, i + CHUNK);
      await query(`DELETE FROM ${table} WHERE lock_key IN (${marks(chunk)})`, chunk);
    }
  }
  for (const [index, fence] of await heldRaises(db, query, floor, counters)) {
    await query(raiseBucket(db), [bucketKey(index), bucketText(index), fence]);
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
 * The largest fence among rows with no owner: per-key counters and released `table` rows of
 * earlier versions (this version's `for-update` rows carry no fence, 0).
 */
async function legacyMax(db: SqlDatabase, query: Query): Promise<number> {
  const result = await query(
    `SELECT MAX(fence) AS m FROM ${db.table} WHERE ${KEY_ROW} AND owner IS NULL`,
    [],
  );
  return Number(result.records[0]?.m ?? 0);
}

/**
 * Buckets that must be raised for rows with an owner (held, or run out and not taken since)
 * whose fence is above `floor`: each is a key row, so it belongs to its own key's bucket, whose
 * counter must be at least its fence. Rows this version granted never need it (their fence was
 * drawn from that very bucket). Index → the value to raise to.
 */
async function heldRaises(
  db: SqlDatabase,
  query: Query,
  floor: number,
  counters: ReadonlyMap<number, number>,
): Promise<Map<number, number>> {
  const result = await query(
    `SELECT lock_key, fence FROM ${db.table} WHERE ${KEY_ROW} AND owner IS NOT NULL AND fence > ?`,
    [floor],
  );
  const raises = new Map<number, number>();
  for (const row of result.records) {
    const index = bucketOfStoredKey(String(row.lock_key).trim(), db.fences.buckets);
    const fence = Number(row.fence);
    if (fence > (counters.get(index) ?? floor) && fence > (raises.get(index) ?? 0)) {
      raises.set(index, fence);
    }
  }
  return raises;
}

/** Upsert of a bucket row that only ever raises its counter (parameters: key, text, value). */
function raiseBucket({ table, dialect }: SqlDatabase): string {
  const insert = `INSERT INTO ${table} (lock_key, key_text, fence) VALUES (?, ?, ?)`;
  switch (dialect.family) {
    case 'postgres':
      return `INSERT INTO ${table} AS cur (lock_key, key_text, fence) VALUES (?, ?, ?) ON CONFLICT (lock_key) DO UPDATE SET fence = GREATEST(cur.fence, EXCLUDED.fence)`;
    case 'mysql':
      return `${insert} ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))`;
    case 'sqlite':
      return `${insert} ON CONFLICT (lock_key) DO UPDATE SET fence = max(fence, excluded.fence)`;
  }
}

/**
 * Deletes, in chunks, rows no lock needs: rows without an owner whose fence is at most `floor`
 * (the carry-over accounted for them: counters and released rows of earlier versions,
 * `for-update` rows nobody has locked; rows locked right now are skipped, never waited for),
 * and leases that ran out (their bucket is above their fence: drawn from it, or raised by the
 * carry-over). Stops early when `stopped()` says so. Returns how many rows it deleted.
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
