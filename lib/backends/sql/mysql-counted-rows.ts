import { createHash } from 'node:crypto';
import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import { isDeadlock, isLockBusy } from './driver-errors';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import type { SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';
import type { SessionLock } from './sql-lock-strategy';
import type { SqlRunner } from './typeorm-types';

/*
 * MariaDB counted `for-update` locks (`permits` above 1). A counted holder share-locks the key's
 * row (so a mutex's or writer's FOR UPDATE waits for it), then the key's count row, then the
 * lowest free of N slot rows FOR UPDATE SKIP LOCKED, then the user-level marker of its slot.
 *
 * - The count row (one per key, made as needed) holds, in `fence`, the N its holders agreed on.
 *   Every counted holder share-locks it for its whole hold and reads N in that locking read, so
 *   while any holds it the row cannot change: two holders whose holds overlap read the same N,
 *   and a holder of another N is refused (`LockConfigError`, permits) instead of admitted. A
 *   count row nobody share-locks (left by a crashed holder) is rewritten by the next taker.
 * - Slot rows of one count share a 60-character prefix and end in the slot's 4 digits, so the
 *   primary key orders them by slot: a range scan FOR UPDATE SKIP LOCKED LIMIT 1 locks the lowest
 *   free one and no other.
 * - The slot marker (`GET_LOCK`, taken once the slot row is held, freed before it is) tells the
 *   server who holds which slot: InnoDB does not say who holds a row no one waits for. Markers
 *   are how readers and mutexes see counted holders, and how `inspect` and `forceRelease` find
 *   them; readers register with markers of their own (see for-update-sharing.ts).
 */

/** Longest wait, s, for a count row another taker is rewriting or making (a few statements). */
const COUNT_ROW_WAIT_S = 1;
/** A counted taker with no free slot looks again after this long at first, ms (doubling) ... */
const SLOT_POLL_MIN_MS = 5;
/** ... and at most this long, ms. */
const SLOT_POLL_MAX_MS = 50;
/**
 * Prefix of a `SKIP LOCKED` read on a take's connection, whose row-lock waits may be bounded to
 * 0 s: MariaDB 10.11 then fails such a read with error 1180 ("Got error 1 during COMMIT") as soon
 * as it skips a locked row. A skipping read never waits, so any other bound changes nothing.
 */
const SKIPPING = 'SET STATEMENT innodb_lock_wait_timeout = 1 FOR';
/** Most slots of one key (MAX_PERMITS): slot markers are numbered 0..1023. */
const MAX_SLOTS = 1_024;

/** The stored key of `key`'s count row (hashed like any key; NUL keeps it apart from them). */
export function countRowKey(key: string): string {
  return storedKey(`${key}\u0000permits`);
}

/** The stored key of slot `i`'s row of `lock`'s count (sorts by `i` within the count). */
function slotRowKey(lock: SessionLock, i: number): string {
  const prefix = storedKey(`${lock.key}\u0000permit\u0000${lock.permits}`).slice(0, 60);
  return `${prefix}${String(i).padStart(4, '0')}`;
}

/**
 * The prefix of a slot's marker (followed by the slot, 0..1023; at most 64 characters in all).
 * User-level locks are server-wide, so it names the database and the table too.
 */
function slotMarker(db: SqlDatabase, key: string): string {
  const digest = createHash('sha256')
    .update(`${db.server.database}\u0000${db.tableName}\u0000${key}`, 'utf8')
    .digest('hex');
  return `dlk:${digest.slice(0, 52)}:`;
}

/**
 * Before the take's transaction, on its connection: makes the key's count row with this taker's
 * N if it is missing, or rewrites it if nobody share-locks it (a crashed holder's, or one whose
 * takers all gave up). A count row someone share-locks is left as it is: its holders' N decides,
 * and the locking read that follows refuses this taker if it differs. `false`: another taker
 * kept it locked longer than a few statements take (the key is busy).
 */
export async function prepareCountRow(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<boolean> {
  const count = countRowKey(lock.key);
  await runner.startTransaction();
  try {
    const free = await runner.query(
      `${SKIPPING} SELECT fence FROM ${db.table} WHERE lock_key = ? FOR UPDATE SKIP LOCKED`,
      [count],
      true,
    );
    const row = free.records[0];
    if (row && Number(row.fence) !== lock.permits) {
      await runner.query(
        `UPDATE ${db.table} SET fence = ? WHERE lock_key = ?`,
        [lock.permits, count],
        true,
      );
    } else if (!row) {
      // Locked or missing: the insert makes it if missing, and waits (briefly) only behind
      // another taker making or rewriting it; share locks do not stop it.
      await runner.query(
        `SET STATEMENT innodb_lock_wait_timeout = ${COUNT_ROW_WAIT_S} FOR INSERT IGNORE INTO ${db.table} (lock_key, key_text, fence) VALUES (?, ?, ?)`,
        [count, `${lock.key} (permits)`, lock.permits],
        true,
      );
    }
    await runner.commitTransaction();
    return true;
  } catch (err) {
    await runner.rollbackTransaction();
    if (isLockBusy(err) || isDeadlock(err)) return false;
    throw db.explain(err);
  }
}

/**
 * In the take's transaction, once the key's row is share-locked: share-locks the count row and
 * checks its N (`'gone'` if a tidy deleted it meanwhile: the take starts again). Throws the
 * permits refusal when the key's counted holders agreed on another N.
 */
export async function lockCountRow(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<'locked' | 'gone'> {
  let permits: unknown;
  try {
    const result = await runner.query(
      `SELECT fence FROM ${db.table} WHERE lock_key = ? LOCK IN SHARE MODE`,
      [countRowKey(lock.key)],
      true,
    );
    if (result.records.length === 0) return 'gone';
    permits = result.records[0]?.fence;
  } catch (err) {
    // Only a taker rewriting or a tidy deleting it holds it otherwise: the take starts again.
    if (isLockBusy(err) || isDeadlock(err)) return 'gone';
    throw db.explain(err);
  }
  if (Number(permits) !== lock.permits)
    throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
  return 'locked';
}

/**
 * In the take's transaction, once the count row is share-locked: locks the lowest free slot row
 * and takes its marker; `null` when every slot row there is held (or there is none yet).
 */
export async function lockFreeSlotMysql(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<number | null> {
  const result = await runner.query(
    `${SKIPPING} SELECT lock_key FROM ${db.table} WHERE lock_key BETWEEN ? AND ? ORDER BY lock_key LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [slotRowKey(lock, 0), slotRowKey(lock, lock.permits - 1)],
    true,
  );
  const stored = result.records[0]?.lock_key;
  if (typeof stored !== 'string') return null;
  const slot = Number(stored.slice(60));
  const marked = await runner.query(
    'SELECT GET_LOCK(?, 0) AS marked',
    [`${slotMarker(db, lock.key)}${slot}`],
    true,
  );
  // The marker is freed before its slot row, so the holder of this row's marker holds the row:
  // a marker held elsewhere means something is wrong; refuse rather than admit.
  if (Number(marked.records[0]?.marked) !== 1) {
    throw new Error(`the marker of slot ${slot} is held by another session`);
  }
  return slot;
}

/**
 * Makes the missing slot rows of `lock`'s count in autocommit on a pooled connection (rows of the
 * take's own transaction would stay invisible, and locked, until it ends). Only the missing ones:
 * an insert that meets an existing row waits for its holder.
 */
export async function makeSlotRowsMysql(db: SqlDatabase, lock: SessionLock): Promise<void> {
  const present = await db.exec(`SELECT lock_key FROM ${db.table} WHERE lock_key BETWEEN ? AND ?`, [
    slotRowKey(lock, 0),
    slotRowKey(lock, lock.permits - 1),
  ]);
  const have = new Set(present.records.map((r) => String(r.lock_key)));
  const missing = Array.from({ length: lock.permits }, (_, i) => i).filter(
    (i) => !have.has(slotRowKey(lock, i)),
  );
  if (missing.length === 0) return;
  try {
    // Another sharer may make (and lock) one meanwhile: then do not wait for it.
    await db.exec(
      `SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT IGNORE INTO ${db.table} (lock_key, key_text, fence) VALUES ${missing.map(() => '(?, ?, 0)').join(', ')}`,
      missing.flatMap((i) => [slotRowKey(lock, i), `${lock.key} (permit ${i} of ${lock.permits})`]),
    );
  } catch (err) {
    if (!isLockBusy(err) && !isDeadlock(err)) throw db.explain(err);
    // the next look finds what the other sharer made
  }
}

/**
 * A counted taker holding the key's and count rows that found no free slot: looks again,
 * briefly pausing, for at most `waitMs` (MariaDB has no "any of these rows" wait, and its row
 * waits count whole seconds); the slot, or `null`.
 */
export async function pollForSlotMysql(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
  waitMs: number,
): Promise<number | null> {
  const deadline = monotonicNow() + waitMs;
  for (let round = 0; monotonicNow() < deadline; round++) {
    const pause = Math.min(SLOT_POLL_MAX_MS, SLOT_POLL_MIN_MS * 2 ** round);
    await sleep(Math.min(pause * (0.5 + Math.random()), Math.max(0, deadline - monotonicNow())));
    const slot = await lockFreeSlotMysql(db, runner, lock);
    if (slot !== null) return slot;
  }
  return null;
}

/** The slots whose markers are held now: the key's counted holders, one slot each. */
export async function markedSlots(db: SqlDatabase, key: string): Promise<number[]> {
  const result = await db.exec(
    `SELECT seq FROM seq_0_to_${MAX_SLOTS - 1} WHERE IS_USED_LOCK(CONCAT(?, seq)) IS NOT NULL ORDER BY seq`,
    [slotMarker(db, key)],
  );
  return result.records.map((r) => Number(r.seq));
}

/** The N the key's count row holds now, if there is one. */
export async function countRowPermits(db: SqlDatabase, key: string): Promise<number | undefined> {
  const result = await db.exec(`SELECT fence FROM ${db.table} WHERE lock_key = ?`, [
    countRowKey(key),
  ]);
  const fence = result.records[0]?.fence;
  return fence === undefined || fence === null ? undefined : Number(fence);
}

/** The full names of the slot markers held now (`forceRelease` ends their sessions). */
export async function heldSlotMarkers(db: SqlDatabase, key: string): Promise<string[]> {
  return (await markedSlots(db, key)).map((slot) => `${slotMarker(db, key)}${slot}`);
}

/**
 * In a tidy's transaction that has locked (and deleted) the key's row, so no sharer is left:
 * deletes the count row and `lock`'s free slot rows, skipping any row someone still locks.
 */
export async function deleteCountRows(
  db: SqlDatabase,
  runner: SqlRunner,
  lock: SessionLock,
): Promise<void> {
  const counted = lock.permits > 1;
  const free = await runner.query(
    `${SKIPPING} SELECT lock_key FROM ${db.table} WHERE lock_key = ?${counted ? ' OR lock_key BETWEEN ? AND ?' : ''} FOR UPDATE SKIP LOCKED`,
    counted
      ? [countRowKey(lock.key), slotRowKey(lock, 0), slotRowKey(lock, lock.permits - 1)]
      : [countRowKey(lock.key)],
    true,
  );
  const keys = free.records.map((r) => String(r.lock_key));
  if (keys.length === 0) return;
  await runner.query(
    `DELETE FROM ${db.table} WHERE lock_key IN (${keys.map(() => '?').join(', ')})`,
    keys,
    true,
  );
}
