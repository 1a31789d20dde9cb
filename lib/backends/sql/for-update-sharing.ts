import { createHash } from 'node:crypto';
import { sleep } from '../../core/shared/timers';
import { advisoryKey64, pgAdvisoryIds } from './advisory.strategy';
import { isDeadlock, isLockBusy } from './driver-errors';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import { truthy, type SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';
import type { SessionHolders, SessionLock } from './sql-lock-strategy';
import {
  countRowPermits,
  deleteCountRows,
  heldSlotMarkers,
  lockCountRow,
  markedSlots,
} from './mysql-counted-rows';
import { killHolderOf, pgMilliseconds, pgTerminate } from './sql-sessions';
import type { SqlRunner } from './typeorm-types';

/*
 * `for-update` locks that several hold at once: readers (`mode: 'shared'`) and counted holders
 * (`permits` above 1; on MariaDB see mysql-counted-rows.ts). Both share-lock the key's row,
 * which keeps writers and mutexes (`FOR UPDATE`) out. The database cannot list a row's share lockers, so each sharer
 * also registers, in the statement that locks the row: PostgreSQL a transaction-level advisory
 * lock in share mode (readers: one id per table and key; counted holders: a two-int id that
 * carries their N), MariaDB a reader the lowest free of 1024 numbered markers (user-level
 * locks), a counted holder its slot's marker. Registrations go with the transaction or session, and tell the checks, `isLocked`,
 * `inspect` and `forceRelease` who shares the key. A counted holder's slot is one of N slot
 * rows (made as needed, left by their holders for the next, deleted by the last sharer), locked
 * `FOR UPDATE SKIP LOCKED`, lowest first.
 */

/**
 * What one locking read found (see ForUpdateStrategy); `'stand-back'`: look again shortly;
 * `'retry'`: look again at once (a bounded wait for a slot ran out).
 */
export type RowLock = 'locked' | 'busy' | 'gone' | 'stand-back' | 'retry';

/** MariaDB: most readers of one key at once (each keeps a numbered marker; see readerMarker). */
const MAX_MYSQL_READERS = 1_024;

/**
 * A sharer's locking read of the key's row in the open transaction, registering it in the same
 * statement. PostgreSQL grants a share lock beside readers however long a writer has waited, so
 * it also says whether a writer is queued on the row (the tuple lock its first waiter holds):
 * the sharer then stands back (`'stand-back'`), which gives writers preference as InnoDB does
 * by itself.
 */
export async function lockRowShared(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
  mode: string,
): Promise<RowLock> {
  const { key } = lock;
  const postgres = db.dialect.family === 'postgres';
  if (!postgres && lock.permits > 1) return lockRowCountedMysql(db, runner, lock, mode);
  const register =
    lock.permits > 1
      ? 'pg_advisory_xact_lock_shared($2::int, $3::int)'
      : 'pg_advisory_xact_lock_shared($2::bigint)';
  const params: unknown[] = postgres
    ? [
        storedKey(key),
        ...(lock.permits > 1 ? [countedClass(db, key), lock.permits] : [readerId(db, key)]),
        db.table,
      ]
    : [readerMarker(db, key), storedKey(key)];
  const sql = postgres
    ? `SELECT lock_key, ${register} IS NULL AS registered,
              EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'tuple'
                        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                        AND l.relation = $${params.length}::regclass
                        AND l.page = (t.ctid::text::point)[0]::int AND l.tuple = (t.ctid::text::point)[1]::int) AS writer_waits
         FROM ${db.table} t WHERE lock_key = $1 FOR SHARE ${mode}`
    : `SELECT lock_key, (SELECT seq FROM seq_0_to_${MAX_MYSQL_READERS - 1} WHERE GET_LOCK(CONCAT(?, seq), 0) LIMIT 1) AS marked
         FROM ${db.table} WHERE lock_key = ? LOCK IN SHARE MODE ${mode}`;
  try {
    const result = await runner.query(sql.trim(), params, true);
    const row = result.records[0];
    if (!row) return 'gone';
    if (postgres) return truthy(row.writer_waits) ? 'stand-back' : 'locked';
    return row.marked === null || row.marked === undefined ? 'busy' : 'locked';
  } catch (err) {
    if (isLockBusy(err)) return 'busy';
    if (isDeadlock(err)) return 'gone';
    throw db.explain(err);
  }
}

/**
 * MariaDB, a counted taker: share-locks the key's row (queued behind a waiting writer, as a
 * reader is), then its count row (which refuses it if its holders agreed on another N). The
 * key's row goes first, so a taker holds the count row only while no mutex holds the key: a
 * mutex's release can then delete a count row left free with its own row, waiting for no one.
 */
async function lockRowCountedMysql(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
  mode: string,
): Promise<RowLock> {
  try {
    const result = await runner.query(
      `SELECT lock_key FROM ${db.table} WHERE lock_key = ? LOCK IN SHARE MODE ${mode}`.trim(),
      [storedKey(lock.key)],
      true,
    );
    if (result.records.length === 0) return 'gone';
  } catch (err) {
    if (isLockBusy(err)) return 'busy';
    if (isDeadlock(err)) return 'gone';
    throw db.explain(err);
  }
  return lockCountRow(db, runner, lock);
}

/**
 * MariaDB, once `lock` is registered (a reader: its marker; a counted holder: its slot's marker)
 * or, for a mutex, before it waits or after it found the key busy: refuses it (`LockConfigError`,
 * permits) when the key is shared with other permits. Readers and mutexes look for slot markers,
 * counted holders for reader markers; of a reader and a counted holder taking at once, the later
 * to register sees the other's marker, since each looks only once its own is taken. Counted
 * holders of different N are kept apart by the count row (see mysql-counted-rows.ts).
 */
async function checkAgreementMysql(db: SqlDatabase, lock: SessionLock): Promise<void> {
  const others =
    lock.permits > 1
      ? (await sharers(db, lock.key)).readers
      : (await markedSlots(db, lock.key)).length;
  if (others > 0) throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
}

/**
 * PostgreSQL, once `lock` is registered (or, for a mutex, before it waits or after it found the
 * key busy): refuses it (`LockConfigError`, permits) when the key's other sharers asked for other
 * permits. A reader or mutex disagrees with any counted holder; a counted holder with readers
 * and with counted holders of another N. Of two disagreeing requests taking at once, the later
 * one's check sees the earlier's registration (each checks only once registered).
 */
export async function checkAgreement(
  db: SqlDatabase,
  lock: SessionLock,
  /** The lock's connection; absent: a pooled one (the lock's transaction failed a statement). */
  runner?: SqlRunner,
): Promise<void> {
  if (db.dialect.family !== 'postgres') return checkAgreementMysql(db, lock);
  const [readerClass, readerObj] = pgAdvisoryIds(readerId(db, lock.key));
  const counted = lock.permits > 1;
  const sql =
    `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE ${PG_REGISTERED} AND objsubid = 2 AND classid = $1 ${counted ? 'AND objid <> $4' : ''})` +
    (counted
      ? ` OR EXISTS (SELECT 1 FROM pg_locks WHERE ${PG_REGISTERED} AND objsubid = 1 AND classid = $2 AND objid = $3)`
      : '') +
    ' AS other';
  const params = counted
    ? [countedClass(db, lock.key), readerClass, readerObj, lock.permits]
    : [countedClass(db, lock.key)];
  const result = runner ? await runner.query(sql, params, true) : await db.exec(sql, params);
  if (truthy(result.records[0]?.other))
    throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
}

/**
 * PostgreSQL, a counted holder that shares the key's row: makes its N slot rows that are
 * missing, in autocommit on a pooled connection (rows its own transaction made would stay
 * invisible to the others until it ends). Slot rows so exist only while someone shares the key
 * row, and the last sharer to leave deletes them: none is left behind by a take that fails.
 */
export async function makeSlotRows(db: SqlDatabase, lock: SessionLock): Promise<void> {
  const texts = slotKeys(lock).map((_, i) => `${lock.key} (permit ${i} of ${lock.permits})`);
  await db.exec(
    `INSERT INTO ${db.table} (lock_key, key_text, fence) SELECT unnest(?::bpchar[]), unnest(?::text[]), 0 ON CONFLICT DO NOTHING`,
    [slotKeys(lock).map(storedKey), texts],
  );
}

/**
 * PostgreSQL, a counted holder sharing the key's row: locks the lowest free of its slot rows in
 * its transaction, or `null` when all are held (or deleted by the last sharer meanwhile).
 */
export async function lockFreeSlot(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<number | null> {
  const stored = slotKeys(lock).map(storedKey);
  const result = await runner.query(
    `SELECT array_position($1::bpchar[], lock_key) - 1 AS slot FROM ${db.table}
      WHERE lock_key = ANY($1::bpchar[]) ORDER BY array_position($1::bpchar[], lock_key) FOR UPDATE SKIP LOCKED LIMIT 1`,
    [stored],
    true,
  );
  const slot = result.records[0]?.slot;
  return slot === undefined || slot === null ? null : Number(slot);
}

/**
 * PostgreSQL, a counted holder sharing the key's row that found no free slot: waits for slot
 * `slot`'s row in the lock queue for at most `waitMs`; `true` when it got it. Anything else
 * (the wait ran out, the row is missing) leaves the transaction to be rolled
 * back and the take tried again. No deadlock: a releasing holder waits for no one.
 */
export async function waitForSlot(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
  slot: number,
  waitMs: number,
): Promise<boolean> {
  await runner.query(`SELECT set_config('lock_timeout', $1, true)`, [pgMilliseconds(waitMs)], true);
  try {
    const result = await runner.query(
      `SELECT lock_key FROM ${db.table} WHERE lock_key = $1 FOR UPDATE`,
      [storedKey(slotKeys(lock)[slot])],
      true,
    );
    return result.records.length > 0;
  } catch (err) {
    if (isLockBusy(err) || isDeadlock(err)) return false;
    throw db.explain(err);
  }
}

/**
 * Run by every sharer once it shares the key no more (after its release's commit, or the
 * rollback of a take that shared the key's row for a moment and gave up): deletes the key's row
 * and the free slot rows of its count if no one holds the key's row or waits for it (locked
 * `FOR UPDATE SKIP LOCKED`, so it never waits). Of the sharers that leave together, the last
 * one's tidy finds no one left, so no row outlives them; a newcomer tidies after itself in turn.
 * PostgreSQL: one statement; MariaDB: a transaction of its own (the check and the delete are two).
 */
export async function tidyIfUnused(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<void> {
  const { key } = lock;
  if (db.dialect.family === 'postgres') {
    const slots = lock.permits > 1 ? slotKeys(lock).map(storedKey) : [];
    await runner.query(
      `WITH mine AS (SELECT lock_key FROM ${db.table} WHERE lock_key = $1 FOR UPDATE SKIP LOCKED)
       DELETE FROM ${db.table} WHERE lock_key IN (SELECT lock_key FROM mine)
          OR (EXISTS (SELECT 1 FROM mine) AND lock_key IN (SELECT lock_key FROM ${db.table} WHERE lock_key = ANY($2::bpchar[]) FOR UPDATE SKIP LOCKED))`,
      [storedKey(key), slots],
      true,
    );
    return;
  }
  for (let attempt = 0; ; attempt++) {
    // READ COMMITTED whatever the session's level (its take's bounds are restored by now): under
    // REPEATABLE READ, InnoDB's SKIP LOCKED was seen to skip a key row nobody locked any more.
    await runner.startTransaction('READ COMMITTED');
    const mine = await runner.query(
      `SELECT lock_key FROM ${db.table} WHERE lock_key = ? FOR UPDATE SKIP LOCKED`,
      [storedKey(key)],
      true,
    );
    if (mine.records.length > 0) {
      await runner.query(`DELETE FROM ${db.table} WHERE lock_key = ?`, [storedKey(key)], true);
      await deleteCountRows(db, runner, lock);
    }
    await runner.commitTransaction();
    if (mine.records.length > 0 || attempt === MYSQL_TIDY_RETRIES.length) return;
    // Skipped. Under READ COMMITTED too, on a loaded server, InnoDB was seen to skip the row of
    // a key whose last sharer had committed (in the server's general log, no other session
    // touched the row after that commit): no one tidied after it, and the row stayed. Look
    // again, briefly, while the row is there. One that someone really holds is skipped again,
    // and its holder tidies after itself.
    await sleep(MYSQL_TIDY_RETRIES[attempt]);
    if (!(await db.rowExists(key))) return;
  }
}

/** MariaDB: pauses before the tidy looks again at a row its SKIP LOCKED skipped, ms. */
const MYSQL_TIDY_RETRIES = [20, 80];

/**
 * PostgreSQL: the counted holders' slots of `lock`'s count: slot rows that exist and are locked
 * (a `FOR KEY SHARE` that skips locked rows leaves them out).
 */
async function heldSlots(db: SqlDatabase, lock: SessionLock): Promise<number[]> {
  const stored = slotKeys(lock).map(storedKey);
  const result = await db.exec(
    `WITH free AS (SELECT lock_key FROM ${db.table} WHERE lock_key = ANY(?::bpchar[]) FOR KEY SHARE SKIP LOCKED)
     SELECT array_position(?::bpchar[], lock_key) - 1 AS slot FROM ${db.table}
      WHERE lock_key = ANY(?::bpchar[]) AND lock_key NOT IN (SELECT lock_key FROM free) ORDER BY 1`,
    [stored, stored, stored],
  );
  return result.records.map((r) => Number(r.slot));
}

/** The sessions sharing the key now (PostgreSQL backend pids, MariaDB thread ids), by kind. */
async function sharers(
  db: SqlDatabase,
  key: string,
): Promise<{ readers: number; counted: number; permits?: number; slots?: number[] }> {
  if (db.dialect.family === 'postgres') {
    const [readerClass, readerObj] = pgAdvisoryIds(readerId(db, key));
    const result = await db.exec(
      `SELECT objsubid, objid, count(DISTINCT pid) AS n FROM pg_locks WHERE ${PG_REGISTERED}
          AND ((objsubid = 1 AND classid = ? AND objid = ?) OR (objsubid = 2 AND classid = ?))
        GROUP BY objsubid, objid`,
      [readerClass, readerObj, countedClass(db, key)],
    );
    let readers = 0;
    let counted = 0;
    let permits: number | undefined;
    for (const row of result.records) {
      if (Number(row.objsubid) === 1) readers += Number(row.n);
      else {
        counted += Number(row.n);
        permits = Number(row.objid);
      }
    }
    return { readers, counted, permits };
  }
  const result = await db.exec(
    `SELECT COUNT(*) AS n FROM seq_0_to_${MAX_MYSQL_READERS - 1} WHERE IS_USED_LOCK(CONCAT(?, seq)) IS NOT NULL`,
    [readerMarker(db, key)],
  );
  const slots = await markedSlots(db, key);
  const permits = slots.length > 0 ? await countRowPermits(db, key) : undefined;
  return { readers: Number(result.records[0]?.n ?? 0), counted: slots.length, permits, slots };
}

/** Whether anyone shares the key now (readers or counted holders). */
export async function isShared(db: SqlDatabase, key: string): Promise<boolean> {
  const { readers, counted } = await sharers(db, key);
  return readers + counted > 0;
}

/** The key's sharers for `inspect`; `undefined` when it has none (a writer, or free). */
export async function sharingHolders(
  db: SqlDatabase,
  key: string,
): Promise<SessionHolders | undefined> {
  const { readers, counted, permits, slots: marked } = await sharers(db, key);
  if (counted > 0 && permits !== undefined) {
    const slots = marked ?? (await heldSlots(db, { key, mode: 'exclusive', permits }));
    return { holders: counted, mode: 'exclusive', permits, slots };
  }
  if (readers > 0) return { holders: readers, mode: 'shared', permits: 1 };
  return undefined;
}

/**
 * Ends every sharer's session (`forceRelease`); `true` when there was one. MariaDB waits,
 * bounded, until each reader's marker is gone, as for the writer's.
 */
export async function endSharers(db: SqlDatabase, key: string): Promise<boolean> {
  if (db.dialect.family === 'postgres') {
    const [readerClass, readerObj] = pgAdvisoryIds(readerId(db, key));
    const result = await db.exec(
      `SELECT ${pgTerminate(db, 'pid')} AS ended FROM (SELECT DISTINCT pid FROM pg_locks WHERE ${PG_REGISTERED}
          AND ((objsubid = 1 AND classid = ? AND objid = ?) OR (objsubid = 2 AND classid = ?))) r`,
      [readerClass, readerObj, countedClass(db, key)],
    );
    return result.records.length > 0;
  }
  const used = await db.exec(
    `SELECT seq FROM seq_0_to_${MAX_MYSQL_READERS - 1} WHERE IS_USED_LOCK(CONCAT(?, seq)) IS NOT NULL`,
    [readerMarker(db, key)],
  );
  const markers = used.records.map(({ seq }) => `${readerMarker(db, key)}${String(seq)}`);
  let ended = false;
  for (const marker of [...markers, ...(await heldSlotMarkers(db, key))]) {
    if (await killHolderOf(db, marker)) ended = true;
  }
  return ended;
}

/** Granted advisory registrations in this database (`pg_locks` columns, unqualified). */
const PG_REGISTERED = `locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

/** PostgreSQL: the advisory id readers of the key register under (per table and key). */
function readerId(db: SqlDatabase, key: string): string {
  return advisoryKey64(`${db.tableName}\u0000reader\u0000${key}`);
}

/**
 * PostgreSQL: the first half of a counted holder's two-int registration (a 31-bit hash of table
 * and key, non-negative so `pg_locks` shows the `int` passed); the second half is its N.
 */
function countedClass(db: SqlDatabase, key: string): number {
  const digest = createHash('sha256').update(`${db.tableName}\u0000counted\u0000${key}`, 'utf8');
  return digest.digest().readUInt32BE(0) & 0x7fffffff;
}

/**
 * The keys of a counted lock's N slot rows (each its own row, hashed like any key; the NULs keep
 * them apart from every key a row can be made for, as PostgreSQL text holds no NUL). Their
 * `key_text` says what they are instead.
 */
function slotKeys(lock: SessionLock): string[] {
  return Array.from(
    { length: lock.permits },
    (_, i) => `${lock.key}\u0000permit\u0000${lock.permits}\u0000${i}`,
  );
}

/**
 * MariaDB: the prefix of a reader's numbered marker (followed by 0..1023; at most 64
 * characters in all). User-level locks are server-wide, so it names the database and table too.
 */
function readerMarker(db: SqlDatabase, key: string): string {
  const digest = createHash('sha256')
    .update(`${db.server.database}\u0000${db.tableName}\u0000${key}`, 'utf8')
    .digest('hex');
  return `dlq:${digest.slice(0, 52)}:`;
}
