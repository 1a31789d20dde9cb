import { createHash } from 'node:crypto';
import { sleep } from '../../core/shared/timers';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import type { SessionHolders, SessionLock } from './sql-lock-strategy';
import { truthy, type SqlDatabase } from './sql-database';
import { killHolderOf } from './sql-sessions';
import type { SqlRunner } from './typeorm-types';

/*
 * MariaDB/MySQL counted `advisory` locks (`permits` above 1) on user-level locks (`GET_LOCK`),
 * which are exclusive and cannot be listed: only asked about by name (`IS_USED_LOCK`). So the
 * names a key's counted holders may take are few and known, and every check reads all of them.
 *
 * - A counted holder of N takes slot i (the lowest free, i < N) as two names: the count mark
 *   `C(key, N, i)` first, then the slot `S(key, i)`. Slot names do not depend on N: a mutex
 *   looks for counted holders of any N by reading the 64 slot names, nothing more. The count
 *   mark says which N the slot's holder asked for: the server tells who holds each name, so
 *   "slot i is held, and not by the session that holds C(key, N, i)" means a holder of another N.
 * - Once it holds both, a counted holder checks: no mutex holds the key's name, and every held
 *   slot's holder also holds that slot's count mark of its own N. Either failing, it gives both
 *   back and is refused (LockConfigError, permits). A mutex, once it holds the key's name,
 *   checks that no slot is held, and is refused likewise. Each side checks only after it holds
 *   (separate statements: MariaDB evaluates a one-row SELECT's subqueries before the
 *   `GET_LOCK` beside them, measured), so of two that disagree and take at once, at least the
 *   later one's check sees the other: never both admitted.
 * - The count mark is taken before the slot and given back after it, so a live holder's slot is
 *   never seen without its mark. A session that ends gives its names back in no set order: a
 *   check that sees a slot without its mark looks again, briefly, before it refuses.
 * - Slots are capped at {@link MYSQL_MAX_PERMITS} so the mutex's check stays one cheap
 *   statement (64 names: ~25 µs more than a bare SELECT, measured; 1,024 names doubled a mutex
 *   take).
 */

/** Most permits of a MariaDB/MySQL advisory counted lock (slot names read by every check). */
export const MYSQL_MAX_PERMITS = 64;

/** A check that saw a slot without its count mark looks again after these pauses, ms. */
const RECHECK_PAUSES_MS = [20, 80];

/**
 * `slot_rows(seq)`: 0..64, numbering the slots (below 64) and the counts (2..64). A recursive CTE
 * (MariaDB 10.2+, MySQL 8+) rather than MariaDB's `seq_0_to_n` tables, which MySQL has not, or
 * a 64-row UNION, which took twice as long to parse as the whole check does to run.
 */
const SLOT_ROWS = `WITH RECURSIVE slot_rows(seq) AS (SELECT 0 UNION ALL SELECT seq + 1 FROM slot_rows WHERE seq < ${MYSQL_MAX_PERMITS})`;

/** The slots held of the key whose slot prefix is the next parameter, in a `WHERE`. */
const SLOT_HELD = `seq < ${MYSQL_MAX_PERMITS} AND IS_USED_LOCK(CONCAT(?, seq)) IS NOT NULL`;

/** The key's digest, hex: the names below take parts of it (each name at most 64 characters). */
function digest(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Prefix of `key`'s slot names, followed by the slot (0..63): 63 characters at most. */
export function mysqlSlotPrefix(key: string): string {
  return `dls:${digest(key).slice(0, 56)}:`;
}

/** Prefix of `key`'s count marks, followed by `<N>:<slot>`: 62 characters at most. */
function countPrefix(key: string): string {
  return `dlc:${digest(key).slice(0, 52)}:`;
}

/** The count mark of slot `slot` of a counted lock of `permits` on `key`. */
export function mysqlCountMark(key: string, permits: number, slot: number): string {
  return `${countPrefix(key)}${permits}:${slot}`;
}

/**
 * A counted take on the pinned connection `runner` (its session bounded already): the lowest
 * free slot below N, its count mark and its slot, then the check. The slot, or `null` when all
 * N are held (or other takers won each free slot this try); throws the disagreement.
 */
export async function takeMysqlSlot(
  runner: SqlRunner,
  lock: SessionLock,
  mutexName: string,
): Promise<number | null> {
  const slots = mysqlSlotPrefix(lock.key);
  const marks = `${countPrefix(lock.key)}${lock.permits}:`;
  // A few tries: another taker may win the free slot this one picked (then pick again).
  for (let attempt = 0; attempt < 3; attempt++) {
    // The pick and its count mark in one statement: the derived table has a LIMIT, so it is
    // materialized first and GET_LOCK runs once, on the slot picked.
    const picked = await runner.query(
      `${SLOT_ROWS} SELECT t.slot, GET_LOCK(CONCAT(?, t.slot), 0) AS marked FROM (SELECT seq AS slot FROM slot_rows WHERE seq < ? AND IS_USED_LOCK(CONCAT(?, seq)) IS NULL AND IS_USED_LOCK(CONCAT(?, seq)) IS NULL ORDER BY seq LIMIT 1) t`,
      [marks, lock.permits, slots, marks],
      true,
    );
    const row = picked.records[0];
    if (!row) return null;
    const slot = Number(row.slot);
    if (!truthy(row.marked)) continue;
    const taken = await runner.query('SELECT GET_LOCK(?, 0) AS ok', [`${slots}${slot}`], true);
    if (!truthy(taken.records[0]?.ok)) {
      await runner.query('SELECT RELEASE_LOCK(?) AS ok', [`${marks}${slot}`], true);
      continue;
    }
    if (await agreed(runner, lock, mutexName)) return slot;
    await releaseMysqlSlot(runner, lock.key, lock.permits, slot);
    throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
  }
  return null;
}

/**
 * Whether a counted holder that just took its slot may stay: no mutex holds the key, and every
 * held slot is held with its count mark of this N (looked at again briefly if not: see above).
 */
async function agreed(runner: SqlRunner, lock: SessionLock, mutexName: string): Promise<boolean> {
  const slots = mysqlSlotPrefix(lock.key);
  const marks = `${countPrefix(lock.key)}${lock.permits}:`;
  for (let look = 0; ; look++) {
    const result = await runner.query(
      `${SLOT_ROWS} SELECT IS_USED_LOCK(?) IS NOT NULL AS mutex, (SELECT COUNT(*) FROM slot_rows WHERE ${SLOT_HELD} AND NOT (IS_USED_LOCK(CONCAT(?, seq)) <=> IS_USED_LOCK(CONCAT(?, seq)))) AS others`,
      [mutexName, slots, slots, marks],
      true,
    );
    const row = result.records[0];
    if (truthy(row?.mutex)) return false;
    if (Number(row?.others ?? 0) === 0) return true;
    if (look >= RECHECK_PAUSES_MS.length) return false;
    // A slot held without its mark: another N, or a session that is ending (names go one by one).
    await sleep(RECHECK_PAUSES_MS[look]);
  }
}

/** Gives back slot `slot` of a counted lock: the slot, then its count mark. Whether the slot was held. */
export async function releaseMysqlSlot(
  runner: SqlRunner,
  key: string,
  permits: number,
  slot: number,
): Promise<boolean> {
  const released = await runner.query(
    'SELECT RELEASE_LOCK(?) AS ok',
    [mysqlSlotName(key, slot)],
    true,
  );
  await runner.query('SELECT RELEASE_LOCK(?) AS ok', [mysqlCountMark(key, permits, slot)], true);
  return truthy(released.records[0]?.ok);
}

/** The name of slot `slot` of `key` (a counted holder's `GET_LOCK`). */
export function mysqlSlotName(key: string, slot: number): string {
  return `${mysqlSlotPrefix(key)}${slot}`;
}

/**
 * The statement telling whether any counted holder holds a slot of the key whose
 * {@link mysqlSlotPrefix} is its one parameter (`held`).
 */
export const MYSQL_SLOTS_HELD = `${SLOT_ROWS} SELECT EXISTS (SELECT 1 FROM slot_rows WHERE ${SLOT_HELD}) AS held`;

/**
 * The statement telling whether anyone holds a key: its mutex (the first parameter, the key's
 * name: `used`) or a slot (the second, its {@link mysqlSlotPrefix}: `counted`).
 */
export const MYSQL_KEY_HELD = `${SLOT_ROWS} SELECT IS_USED_LOCK(?) IS NOT NULL AS used, EXISTS (SELECT 1 FROM slot_rows WHERE ${SLOT_HELD}) AS counted`;

/**
 * Who holds `key` on MariaDB/MySQL: its mutex's holder, or its counted holders with their
 * slots and the N the first of them asked for (read from its count mark).
 */
export async function mysqlAdvisoryHolders(
  db: SqlDatabase,
  key: string,
  mutexName: string,
): Promise<SessionHolders> {
  const result = await db.exec(
    `${SLOT_ROWS} SELECT IS_USED_LOCK(?) IS NOT NULL AS mutex, (SELECT GROUP_CONCAT(seq ORDER BY seq) FROM slot_rows WHERE ${SLOT_HELD}) AS slots`,
    [mutexName, mysqlSlotPrefix(key)],
  );
  const row = result.records[0];
  if (truthy(row?.mutex)) return { holders: 1, mode: 'exclusive', permits: 1 };
  const slots =
    row?.slots === null || row?.slots === undefined
      ? []
      : String(row.slots)
          .split(',')
          .map(Number)
          .sort((a, b) => a - b);
  if (slots.length === 0) return { holders: 0 };
  // The N whose count mark the first slot's holder holds (2..64).
  const counted = await db.exec(
    `${SLOT_ROWS} SELECT seq AS permits FROM slot_rows WHERE seq >= 2 AND IS_USED_LOCK(CONCAT(?, seq, ':', ?)) <=> IS_USED_LOCK(?) LIMIT 1`,
    [countPrefix(key), slots[0], mysqlSlotName(key, slots[0])],
  );
  const permits = counted.records[0] ? Number(counted.records[0].permits) : undefined;
  return { holders: slots.length, mode: 'exclusive', permits, slots };
}

/** Ends the sessions holding `key`'s mutex or any of its slots; whether any was held. */
export async function killMysqlAdvisoryHolders(
  db: SqlDatabase,
  key: string,
  mutexName: string,
): Promise<boolean> {
  let ended = await killHolderOf(db, mutexName);
  const result = await db.exec(`${SLOT_ROWS} SELECT seq FROM slot_rows WHERE ${SLOT_HELD}`, [
    mysqlSlotPrefix(key),
  ]);
  for (const row of result.records) {
    if (await killHolderOf(db, mysqlSlotName(key, Number(row.seq)))) ended = true;
  }
  return ended;
}
