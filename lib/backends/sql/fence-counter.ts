import { sleep } from '../../core/shared/timers';
import { LockBackendError } from '../../errors/lock.errors';
import { isDeadlock } from './driver-errors';
import { bucketKey, bucketText, META_KEY } from './fence-layout';
import type { SqlDatabase } from './sql-database';
import type { SqlResult } from './typeorm-types';

/*
 * Fence draws of the session strategies (`for-update`, `advisory`) and the fence `inspect`
 * reports for a free key. A session lock's fence is drawn from its key's bucket (see
 * fence-layout.ts) in autocommit on a pooled connection once the database lock is held — never
 * on the holder's connection: a rolled-back transaction must never hand the same fence out
 * twice. The database lock serialises the grants of the key, so its draws are in grant order.
 */

/** Tries of a fence draw the server rolls back to break a deadlock. */
const DRAW_ATTEMPTS = 5;

/**
 * Draws the next fence for `key` from its bucket (created at the layout's floor if missing). A
 * draw rolled back to break a deadlock (possible only against a change of the bucket count,
 * which locks the layout row before the buckets) drew nothing, and is made again.
 */
export async function nextFence(db: SqlDatabase, key: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await drawFence(db, key);
    } catch (err) {
      if (!isDeadlock(err) || attempt >= DRAW_ATTEMPTS) throw err;
      await sleep(Math.random() * 5 * attempt);
    }
  }
}

/** One fence draw, in autocommit on a pooled connection. */
async function drawFence(db: SqlDatabase, key: string): Promise<number> {
  const { dialect, table } = db;
  const index = db.fences.bucketOf(key);
  const bucket = bucketKey(index);
  if (dialect.family === 'mysql') {
    // One statement: the bucket row is bumped, or created above the floor; LAST_INSERT_ID(expr)
    // puts the new value in the OK packet, so no second round trip reads it back.
    const result = await db.exec(
      `INSERT INTO ${table} (lock_key, key_text, fence) VALUES (?, ?, LAST_INSERT_ID(${mysqlFloor(db)} + 1)) ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)`,
      [bucket, bucketText(index), META_KEY],
    );
    return insertIdOf(result);
  }
  // Postgres: the bump alone is the usual case; a bucket used for the first time is created
  // first, reading the floor under a share lock (see createBucket).
  for (let attempt = 0; attempt < 2; attempt++) {
    const result = await db.exec(
      `UPDATE ${table} SET fence = fence + 1 WHERE lock_key = ? RETURNING fence`,
      [bucket],
    );
    if (result.records.length === 1) return Number(result.records[0].fence);
    await createBucket(db, index);
  }
  throw missingLayout(db);
}

/**
 * Postgres: creates bucket `index` at the layout's floor if it does not exist. The floor is read
 * `FOR SHARE`, so a change of the bucket count raising it (which holds the layout row `FOR UPDATE` while it
 * raises every bucket) is either seen or waited for: no bucket is created below a raised floor.
 */
export async function createBucket(db: SqlDatabase, index: number): Promise<void> {
  const { sql, params } = bucketCreation(db, index);
  await db.exec(sql, params);
}

/**
 * The statement that creates bucket `index` at the layout's floor if it does not exist, on any
 * database: PostgreSQL and MariaDB/MySQL read the floor under a share lock (see
 * {@link createBucket}); SQLite, one writer at a time, needs none.
 */
export function bucketCreation(db: SqlDatabase, index: number): { sql: string; params: unknown[] } {
  const { table, dialect } = db;
  const params = [bucketKey(index), bucketText(index), META_KEY];
  switch (dialect.family) {
    case 'postgres':
      return {
        sql: `INSERT INTO ${table} (lock_key, key_text, fence) SELECT ?, ?, fence FROM ${table} WHERE lock_key = ? FOR SHARE ON CONFLICT (lock_key) DO NOTHING`,
        params,
      };
    case 'mysql':
      return {
        sql: `INSERT IGNORE INTO ${table} (lock_key, key_text, fence) VALUES (?, ?, ${mysqlFloor(db)})`,
        params,
      };
    case 'sqlite':
      return {
        sql: `INSERT OR IGNORE INTO ${table} (lock_key, key_text, fence) SELECT ?, ?, fence FROM ${table} WHERE lock_key = ?`,
        params,
      };
  }
}

/**
 * MariaDB/MySQL: the layout's floor as a scalar subquery (its one parameter is {@link META_KEY}),
 * read under a share lock for the reason given at {@link createBucket}. The derived table with
 * `LIMIT` is materialised, which is what lets MySQL read the table an INSERT writes.
 */
export function mysqlFloor(db: SqlDatabase): string {
  return `(SELECT m.fence FROM (SELECT fence FROM ${db.table} WHERE lock_key = ? LIMIT 1 LOCK IN SHARE MODE) AS m)`;
}

/**
 * The counter of `key`'s bucket (the floor if the bucket does not exist yet): at least every
 * fence the key was ever granted, and below the next one.
 */
export async function bucketFence(db: SqlDatabase, key: string): Promise<number> {
  const bucket = db.fences.bucketKeyOf(key);
  const result = await db.exec(`SELECT lock_key, fence FROM ${db.table} WHERE lock_key IN (?, ?)`, [
    bucket,
    META_KEY,
  ]);
  let floor = 0;
  for (const row of result.records) {
    if (String(row.lock_key).trim() === bucket) return Number(row.fence);
    floor = Number(row.fence);
  }
  return floor;
}

/** MariaDB/MySQL: the value a statement handed to `LAST_INSERT_ID(expr)`, from its OK packet. */
export function insertIdOf(result: SqlResult): number {
  return Number((result.raw as { insertId?: unknown } | undefined)?.insertId ?? 0);
}

/** The layout row is gone (deleted by hand): fences cannot be drawn safely without its floor. */
export function missingLayout(db: SqlDatabase): LockBackendError {
  return new LockBackendError(
    db.backendName,
    `the fence layout row of ${db.table} is missing; restart the backend to recreate it`,
  );
}
