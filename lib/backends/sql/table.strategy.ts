import type { GrantRequest, StoreLockInfo } from '../../core/contract/lock-backend';
import { createBucket, insertIdOf, missingLayout, mysqlFloor } from './fence-counter';
import { bucketKey, bucketText, META_KEY, RESERVED_PREFIX } from './fence-layout';
import { releaseChannel } from './pg-release-listener';
import { markerOf } from './holder-rows';
import type {
  LeaseContention,
  LeaseGrant,
  LeaseStrategy,
  SharingSupport,
} from './sql-lock-strategy';
import { storedKey } from './sql-dialect';
import { affectedRows, type SqlDatabase } from './sql-database';
import { retryDeadlocks, runScript } from './sql-script';
import {
  contend,
  forceReleaseKey,
  inspectHolders,
  isHolderRequest,
  releaseHolder,
  renewHolders,
  takeHolder,
  withdraw,
} from './table-sharing';

/** Leases renewed by one statement at most (well inside every driver's parameter limit). */
const RENEW_CHUNK = 500;

/**
 * `strategy: 'table'` (Postgres, MySQL/MariaDB, SQLite): a row per held key with owner token,
 * expiry and fence. Take = one statement that draws the fence from the key's bucket (see
 * fence-layout.ts) and, while that bucket row is locked, inserts the key's row or takes it over
 * if it is free or expired; expiry is judged by the database server's clock (SQLite: the
 * machine's monotonic clock, see `SqlDialect.nowMs`). Release deletes the row (conditioned on
 * the owner token), so the table holds the rows of keys held now plus the bucket rows, however
 * many keys were ever locked. Renewals are conditioned on the token and on the lease still
 * running, one statement per batch. Waiting is the engine's polling with backoff.
 * `forceRelease` deletes the row: the stale holder's next renewal, conditioned on its token,
 * finds it gone.
 *
 * Shared and counted locks (`mode: 'shared'`, `permits` above 1) keep a row per holder besides
 * the key's row, which then says how the key is held (see holder-rows.ts and table-sharing.ts);
 * a mutex's statements are those above, unchanged. Their renewals are batched too: one
 * transaction per batch.
 */
export class TableStrategy implements LeaseStrategy {
  readonly kind = 'lease';
  readonly sharing: SharingSupport = { shared: true, permits: true };

  async take(db: SqlDatabase, request: GrantRequest): Promise<LeaseGrant | null> {
    if (isHolderRequest(request)) return runScript(db, () => takeHolder(db, request));
    const { key, token, ttlMs } = request;
    const fence = await retryDeadlocks(() => {
      switch (db.dialect.family) {
        case 'postgres':
          return takePostgres(db, key, token, ttlMs);
        case 'mysql':
          return takeMysql(db, key, token, ttlMs);
        case 'sqlite':
          return takeSqlite(db, key, token, ttlMs);
      }
    });
    return fence === null ? null : { fence, permit: 0 };
  }

  /**
   * A mutex's renewal, one statement; when it finds no row of `token`, the token may hold a
   * shared or counted lock (the engine's `extend` does not say), whose renewal is tried then.
   */
  async renew(db: SqlDatabase, key: string, token: string, ttlMs: number): Promise<boolean> {
    if (await renewMutex(db, key, token, ttlMs)) return true;
    const [renewed] = await runScript(db, () => renewHolders(db, ttlMs, [{ key, token }]));
    return renewed;
  }

  /**
   * Per chunk of leases sharing a ttl, each renewed on the same condition as {@link renew}:
   * mutexes in one statement (see {@link renewChunk}), shared and counted holders in one
   * transaction of a few statements (see `renewHolders`), however many leases the chunk has.
   * A chunk that fails fails its own leases; the call throws only when every lease failed.
   */
  async renewMany(
    db: SqlDatabase,
    requests: readonly GrantRequest[],
  ): Promise<Array<boolean | Error>> {
    const results: Array<boolean | Error> = new Array<boolean | Error>(requests.length);
    // Mutexes apart from holders (their rows differ), each by ttl.
    const groups = new Map<string, number[]>();
    for (const [i, request] of requests.entries()) {
      const group = `${isHolderRequest(request) ? 'holder' : 'mutex'}:${request.ttlMs}`;
      const indexes = groups.get(group);
      if (indexes) indexes.push(i);
      else groups.set(group, [i]);
    }
    let failures = 0;
    let firstError: unknown;
    for (const indexes of groups.values()) {
      const { ttlMs } = requests[indexes[0]];
      const holders = isHolderRequest(requests[indexes[0]]);
      for (let start = 0; start < indexes.length; start += RENEW_CHUNK) {
        const chunk = indexes.slice(start, start + RENEW_CHUNK);
        const leases = chunk.map((i) => requests[i]);
        try {
          const renewed = holders
            ? await runScript(db, () => renewHolders(db, ttlMs, leases))
            : await renewChunk(db, ttlMs, leases);
          chunk.forEach((i, j) => (results[i] = renewed[j]));
        } catch (err) {
          failures += chunk.length;
          firstError ??= err;
          const error = err instanceof Error ? err : new Error(String(err));
          for (const i of chunk) results[i] = error;
        }
      }
    }
    if (failures > 0 && failures === requests.length) throw firstError;
    return results;
  }

  /**
   * A mutex's release (one statement, as always); when it finds no row of `token`, the token may
   * hold a shared or counted lock, released then.
   */
  async release(db: SqlDatabase, key: string, token: string): Promise<boolean> {
    const mutex = await releaseMutex(db, key, token);
    if (mutex !== undefined) return mutex;
    return (await runScript(db, () => releaseHolder(db, key, token))) ?? false;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    const result = await db.exec(
      `SELECT 1 AS held FROM ${db.table} WHERE lock_key = ? AND ${db.dialect.heldLease}`,
      [storedKey(key)],
    );
    return result.records.length > 0;
  }

  /**
   * Held: the holder's fence and lease left. Free: the counter of the key's bucket (or the floor
   * a new bucket starts at), which is at least the key's last fence and below its next one.
   */
  async inspect(db: SqlDatabase, key: string): Promise<StoreLockInfo> {
    const k = storedKey(key);
    const bucket = db.fences.bucketKeyOf(key);
    const result = await db.exec(
      `SELECT lock_key, owner, fence, CASE WHEN lock_key = ? AND ${db.dialect.heldLease} THEN expires_at - ${db.dialect.nowMs} END AS remaining FROM ${db.table} WHERE lock_key IN (?, ?, ?)`,
      [k, k, bucket, META_KEY],
    );
    let keyFence = 0;
    let bucketFence: number | undefined;
    let floor = 0;
    for (const row of result.records) {
      const stored = String(row.lock_key).trim();
      if (stored === k) {
        if (row.remaining !== null && row.remaining !== undefined) {
          const remainingMs = Math.max(0, Number(row.remaining));
          const marker = markerOf(row.owner);
          // Held shared or counted: the holder rows say who and how many.
          if (marker) return inspectHolders(db, key, marker, remainingMs);
          // SQLite tags the token with the boot (`<boot>/<token>`); a token holds no '/'.
          const owner = String(row.owner);
          return {
            held: true,
            fence: Number(row.fence),
            remainingMs,
            holders: 1,
            owner: owner.slice(owner.lastIndexOf('/') + 1),
          };
        }
        keyFence = Number(row.fence);
      } else if (stored === bucket) bucketFence = Number(row.fence);
      else floor = Number(row.fence);
    }
    return { held: false, fence: Math.max(keyFence, bucketFence ?? floor), holders: 0 };
  }

  /** Deletes the key's row, and the rows of every shared or counted holder with it. */
  async forceRelease(db: SqlDatabase, key: string): Promise<boolean> {
    return runScript(db, () => forceReleaseKey(db, key));
  }

  contend(db: SqlDatabase, request: GrantRequest): Promise<LeaseContention> {
    return contend(db, request);
  }

  withdraw(db: SqlDatabase, key: string, token: string): Promise<boolean> {
    return withdraw(db, key, token);
  }
}

/**
 * A mutex's release: deletes the key's row if `token` owns it; `true` when its lease was still
 * running, `false` when it had run out, `undefined` when the key's row is not `token`'s.
 */
async function releaseMutex(
  db: SqlDatabase,
  key: string,
  token: string,
): Promise<boolean | undefined> {
  const { table, dialect } = db;
  const params = [storedKey(key), dialect.owner(token)];
  if (dialect.family === 'postgres') {
    // As below, and the release is announced to waiters (LISTEN/NOTIFY) in the same
    // statement: a separate pg_notify was one more round trip per release, waiters or not.
    const result = await db.exec(
      `WITH d AS (DELETE FROM ${table} WHERE lock_key = ? AND owner = ? RETURNING lock_key, CASE WHEN expires_at > ${dialect.nowMs} THEN 1 ELSE 0 END AS live) SELECT live, pg_notify(?, lock_key) AS sent FROM d`,
      [...params, releaseChannel(db.tableName)],
    );
    return result.records.length === 0 ? undefined : Number(result.records[0].live) === 1;
  }
  if (dialect.family !== 'mysql') {
    // Ours, running or not, is deleted; only a running lease was still held.
    const result = await db.exec(
      `DELETE FROM ${table} WHERE lock_key = ? AND owner = ? RETURNING CASE WHEN expires_at > ${dialect.nowMs} THEN 1 ELSE 0 END AS live`,
      params,
    );
    return result.records.length === 0 ? undefined : Number(result.records[0].live) === 1;
  }
  const result = await db.exec(
    `DELETE FROM ${table} WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
    params,
  );
  if (affectedRows(result) === 1) return true;
  // Ours but already expired (nobody took it): deleted anyway, yet it was not held.
  const expired = await db.exec(`DELETE FROM ${table} WHERE lock_key = ? AND owner = ?`, params);
  return affectedRows(expired) === 1 ? false : undefined;
}

/** A mutex's renewal: one statement, conditioned on the token and on the lease still running. */
async function renewMutex(
  db: SqlDatabase,
  key: string,
  token: string,
  ttlMs: number,
): Promise<boolean> {
  const { table, dialect } = db;
  const result = await db.exec(
    `UPDATE ${table} SET expires_at = ${dialect.nowMs} + ? WHERE lock_key = ? AND owner = ? AND expires_at > ${dialect.nowMs}`,
    [ttlMs, storedKey(key), dialect.owner(token)],
  );
  return affectedRows(result) === 1;
}

/**
 * Postgres, one statement: the bucket's bump (its row lock held to the end of the statement, so
 * the grants of a key are serialised with their draws) feeds the insert of the key's row, which
 * takes over an existing row only if it is free or expired. `drawn` is null when the bucket does
 * not exist yet (it is then created and the take tried once more), `granted` when the key is busy
 * (the draw is spent: fences may skip, never repeat).
 */
async function takePostgres(
  db: SqlDatabase,
  key: string,
  token: string,
  ttlMs: number,
): Promise<number | null> {
  const { table, dialect } = db;
  const index = db.fences.bucketOf(key);
  const sql =
    `WITH drawn AS (UPDATE ${table} SET fence = fence + 1 WHERE lock_key = ? RETURNING fence), ` +
    `granted AS (INSERT INTO ${table} AS cur (lock_key, key_text, owner, expires_at, fence) ` +
    `SELECT ?, ?, ?, ${dialect.nowMs} + ?, fence FROM drawn ` +
    `ON CONFLICT (lock_key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence ` +
    `WHERE ${dialect.freeLease('cur.')} RETURNING cur.fence) ` +
    `SELECT (SELECT fence FROM drawn) AS drawn, (SELECT fence FROM granted) AS granted`;
  const params = [bucketKey(index), storedKey(key), key, dialect.owner(token), ttlMs];
  for (let attempt = 0; attempt < 2; attempt++) {
    const row = (await db.exec(sql, params)).records[0];
    if (row?.drawn !== null && row?.drawn !== undefined) {
      return row.granted === null || row.granted === undefined ? null : Number(row.granted);
    }
    await createBucket(db, index);
  }
  throw missingLayout(db);
}

/**
 * MariaDB/MySQL, one statement of two rows processed in order: the bucket row first (bumped, or
 * created above the floor; locked to the end of the statement), then the key's row, whose fence
 * is the value the first row handed to `LAST_INSERT_ID(expr)`. On a busy key the update resets
 * it to 0, so the statement's OK packet says granted (the fence) or busy (0) without a read.
 */
async function takeMysql(
  db: SqlDatabase,
  key: string,
  token: string,
  ttlMs: number,
): Promise<number | null> {
  const { table, dialect } = db;
  const index = db.fences.bucketOf(key);
  const reserved = `lock_key LIKE '${RESERVED_PREFIX}%'`;
  const result = await db.exec(
    `INSERT INTO ${table} (lock_key, key_text, owner, expires_at, fence) VALUES ` +
      `(?, ?, NULL, NULL, LAST_INSERT_ID(${mysqlFloor(db)} + 1)), ` +
      `(?, ?, ?, ${dialect.nowMs} + ?, LAST_INSERT_ID()) ` +
      `ON DUPLICATE KEY UPDATE ` +
      `fence = IF(${reserved}, LAST_INSERT_ID(fence + 1), IF(${dialect.freeLease()}, VALUES(fence), fence + LAST_INSERT_ID(0))), ` +
      `owner = IF(${reserved} OR LAST_INSERT_ID() = 0, owner, VALUES(owner)), ` +
      `expires_at = IF(${reserved} OR LAST_INSERT_ID() = 0, expires_at, VALUES(expires_at))`,
    [
      bucketKey(index),
      bucketText(index),
      META_KEY,
      storedKey(key),
      key,
      dialect.owner(token),
      ttlMs,
    ],
  );
  const fence = insertIdOf(result);
  return fence > 0 ? fence : null;
}

/**
 * SQLite, one statement (SQLite runs one writer at a time, so it is atomic with every other
 * grant): the next fence is computed once (a materialised CTE: the bucket's counter, or the
 * floor, plus one) and written to both the bucket row and the key's row, which is taken over
 * only if it is free, expired or left by an earlier boot. The key's row comes back only if it
 * was taken.
 */
async function takeSqlite(
  db: SqlDatabase,
  key: string,
  token: string,
  ttlMs: number,
): Promise<number | null> {
  const { table, dialect } = db;
  const index = db.fences.bucketOf(key);
  const bucket = bucketKey(index);
  const k = storedKey(key);
  const result = await db.exec(
    `WITH next AS MATERIALIZED (SELECT COALESCE((SELECT fence FROM ${table} WHERE lock_key = ?), (SELECT fence FROM ${table} WHERE lock_key = ?)) + 1 AS fence) ` +
      `INSERT INTO ${table} (lock_key, key_text, owner, expires_at, fence) ` +
      `SELECT ?, ?, NULL, NULL, fence FROM next ` +
      `UNION ALL SELECT ?, ?, ?, ${dialect.nowMs} + ?, fence FROM next WHERE true ` +
      `ON CONFLICT (lock_key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, ` +
      `fence = CASE WHEN lock_key = ? THEN max(fence + 1, excluded.fence) ELSE excluded.fence END ` +
      `WHERE lock_key = ? OR ${dialect.freeLease()} RETURNING lock_key, fence`,
    [
      bucket,
      META_KEY,
      bucket,
      bucketText(index),
      k,
      key,
      dialect.owner(token),
      ttlMs,
      bucket,
      bucket,
    ],
  );
  const row = result.records.find((r) => r.lock_key === k);
  return row ? Number(row.fence) : null;
}

/**
 * One chunk of mutex renewals of one ttl, in one statement; per lease, whether it was renewed.
 * MariaDB/MySQL have no `UPDATE … RETURNING`, so there the renewed rows are read back by a
 * second statement: those still ours and running are the ones it renewed (a row it skipped had
 * run out, and an expired lease never runs again).
 */
async function renewChunk(
  db: SqlDatabase,
  ttlMs: number,
  requests: readonly GrantRequest[],
): Promise<boolean[]> {
  const { table, dialect } = db;
  const keys = requests.map((r) => storedKey(r.key));
  const pairs: unknown[] = [];
  requests.forEach((r, i) => pairs.push(keys[i], dialect.owner(r.token)));
  const mine =
    `lock_key IN (${keys.map(() => '?').join(', ')}) ` +
    `AND (lock_key, owner) IN (${requests.map(() => '(?, ?)').join(', ')}) ` +
    `AND expires_at > ${dialect.nowMs}`;
  const update = `UPDATE ${table} SET expires_at = ${dialect.nowMs} + ? WHERE ${mine}`;
  const params = [ttlMs, ...keys, ...pairs];
  let rows;
  if (dialect.family === 'mysql') {
    await db.exec(update, params);
    rows = (
      await db.exec(`SELECT lock_key, owner FROM ${table} WHERE ${mine}`, [...keys, ...pairs])
    ).records;
  } else {
    rows = (await db.exec(`${update} RETURNING lock_key, owner`, params)).records;
  }
  const renewed = new Set(
    rows.map((row) => `${String(row.lock_key).trim()}\u0000${String(row.owner)}`),
  );
  return requests.map((r, i) => renewed.has(`${keys[i]}\u0000${dialect.owner(r.token)}`));
}
