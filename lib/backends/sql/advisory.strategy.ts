import { createHash } from 'node:crypto';
import { monotonicNow } from '../../core/shared/clock';
import { isLockBusy } from './driver-errors';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import { connectionAnswers } from './pinned-connections';
import type {
  SessionCapabilities,
  SessionHold,
  SessionHolders,
  SessionLock,
  SessionStrategy,
} from './sql-lock-strategy';
import { truthy, type SqlDatabase } from './sql-database';
import type { SqlFamily } from './sql-dialect';
import { pgHasIdleSessionTimeout } from './sql-server';
import {
  killMysqlAdvisoryHolders,
  MYSQL_KEY_HELD,
  MYSQL_MAX_PERMITS,
  MYSQL_SLOTS_HELD,
  mysqlAdvisoryHolders,
  mysqlSlotName,
  mysqlSlotPrefix,
  releaseMysqlSlot,
  takeMysqlSlot,
} from './mysql-advisory-slots';
import {
  boundMysqlSession,
  MYSQL_RESTORE_SESSION,
  pgMilliseconds,
  pgTerminate,
} from './sql-sessions';
import type { SqlRunner } from './typeorm-types';

/** Postgres: the session's `idle_session_timeout` back to what `RESET` would give it. */
const PG_RESTORE_IDLE_TIMEOUT = pgRestore('idle_session_timeout');
/** Postgres: the session's `lock_timeout` back to what `RESET` would give it. */
const PG_RESTORE_LOCK_TIMEOUT = pgRestore('lock_timeout');
/** Largest PostgreSQL `lock_timeout`, ms (an int); longer waits are unbounded (`0`). */
const MAX_PG_LOCK_TIMEOUT_MS = 2_147_483_647;
/**
 * A counted lock's slot ids encode its `permits` (slot i of N: `N * SLOT_SPACE + i`), so
 * holders that disagree about N are told apart in `pg_locks`; above `MAX_PERMITS` (1024).
 */
const SLOT_SPACE = 2_048;
/**
 * `objid` of a key's reader mark (two-int id, the slots' `classid`), below every slot id: each
 * reader holds it in share mode beside the key's lock, so a counted holder's check looks for
 * readers by this mark rather than by "shares the key's lock, holds no slot". A dying session's
 * locks are given back one lock-table partition at a time, so a counted holder killed mid-hold
 * can for a moment show the key's share without its slot: read that way it looked like a
 * reader, and a waiter granted that slot refused itself (chaos row "slot holder kill -9").
 */
const READER_MARK = 1;
/** A counted waiter waits for one slot at a time for at most this long, then looks at all, ms. */
const SLOT_WAIT_MAX_MS = 500;
/** ... starting with this long (doubling), ms. */
const SLOT_WAIT_MIN_MS = 20;

/**
 * `strategy: 'advisory'`: Postgres `pg_try_advisory_lock` on a 64-bit hash of the key, or
 * MariaDB/MySQL `GET_LOCK` on a hashed name (<= 64 characters), taken and released on the same
 * pinned connection (an unlock sent on another pooled connection would silently do nothing).
 * Hashing means two different keys can collide (2^-64 per pair on Postgres, 2^-240 on MariaDB):
 * a collision makes them exclude each other, never lets two holders in. Session advisory
 * locks do not survive PgBouncer transaction pooling: connect directly or in session mode.
 *
 * Postgres also grants shared and counted locks, and waits in its own lock queue: a reader holds
 * the key's lock in share mode (`pg_advisory_lock_shared`), a writer in exclusive mode, and
 * the lock manager queues a new request behind a conflicting waiting one, so a waiting writer
 * keeps new readers out (writer preference: a try fails as well). A counted lock of N holds the
 * lowest free of N slot locks (two-int ids: a 32-bit hash of the key, `N * 2048 + slot`) and
 * the key's lock in share mode, which keeps writers and mutexes out. A reader also holds the
 * key's reader mark (same hash, id 1) in share mode. Readers and counted holders both share the
 * key's lock, so each checks `pg_locks` once it holds: a reader beside counted holders (a
 * slot), or counted holders of another N, or a counted lock beside a reader (a mark) or a
 * writer, is refused (LockConfigError, permits) rather than over-admitted. Of two such requests
 * taking at once, the later one's check sees the earlier (each checks only once it holds).
 *
 * MariaDB/MySQL `GET_LOCK` is exclusive only, so there shared requests are refused (by the
 * engine). A counted lock of N (up to 64) holds the lowest free of 64 slot names and a count
 * mark saying its N; a mutex, once it holds the key's name, checks that no slot is held (see
 * `mysql-advisory-slots.ts`). Waiting is the engine's polling.
 *
 * The server ends a holder it stops hearing from after `sessionTimeoutMs`: Postgres 14+
 * `idle_session_timeout`, set with the statement that takes the lock (before a wait, so a
 * waiter that is granted after its process vanished is ended too), MariaDB/MySQL
 * `wait_timeout`, set before it; both are given back at release.
 */
export class AdvisoryStrategy implements SessionStrategy {
  readonly kind = 'session';

  constructor(private readonly sessionTimeoutMs: number) {}

  supports(family: SqlFamily): SessionCapabilities {
    const postgres = family === 'postgres';
    return {
      shared: postgres,
      permits: true,
      maxPermits: postgres ? undefined : MYSQL_MAX_PERMITS,
      waitsInDatabase: postgres,
    };
  }

  async take(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
  ): Promise<number | null> {
    if (db.dialect.family !== 'postgres') return this.takeMysql(runner, lock);
    if (lock.permits > 1) return this.takeSlot(db, runner, lock, waitMs);
    if (waitMs > 0) return (await this.waitPg(db, runner, lock, waitMs)) ? 0 : null;
    if (lock.mode === 'shared') return (await this.tryShared(db, runner, lock)) ? 0 : null;
    if (await this.tryExclusive(db, runner, lock.key)) return 0;
    // Busy: a key that counted holders share is refused rather than waited for in vain.
    if (await hasSlotHolders(db, lock.key))
      throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
    return null;
  }

  /** The mutex's own statement (unchanged): the bound is set exactly when the lock is taken. */
  private async tryExclusive(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
    if (!pgHasIdleSessionTimeout(db.server)) {
      return query(runner, `SELECT pg_try_advisory_lock($1::bigint) AS ok`, [advisoryKey64(key)]);
    }
    // One statement: the bound is set exactly when the lock is taken, so a failed try leaves
    // the pooled connection as it was, and a holder that never hears back is bounded too.
    const result = await runner.query(
      `SELECT CASE WHEN pg_try_advisory_lock($1::bigint) THEN set_config('idle_session_timeout', $2, false) END AS bound`,
      [advisoryKey64(key), pgMilliseconds(this.sessionTimeoutMs)],
      true,
    );
    return result.records[0]?.bound != null;
  }

  /** A reader's try: share mode (refused while a writer holds or waits), then the check. */
  private async tryShared(db: SqlDatabase, runner: SqlRunner, lock: SessionLock): Promise<boolean> {
    // CASE: the mark only with the key's share (a mark without it would look like a reader).
    const taken = await query(
      runner,
      `SELECT CASE WHEN pg_try_advisory_lock_shared($1::bigint) THEN pg_try_advisory_lock_shared($2::int, $3::int) ELSE false END AS ok`,
      [advisoryKey64(lock.key), ...readerMark(lock.key)],
    );
    if (!taken) return false;
    await this.checkReader(db, runner, lock, true);
    return true;
  }

  /**
   * Postgres, a mutex, writer or reader that may wait: in the lock manager's queue, for at most
   * `waitMs` (`lock_timeout`), the session bound set first. A writer is refused at once when
   * counted holders share the key; a reader is checked once granted. `false` when the wait ran
   * out (the session's settings given back).
   */
  private async waitPg(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
  ): Promise<boolean> {
    const id = advisoryKey64(lock.key);
    if (lock.mode === 'exclusive' && (await hasSlotHolders(db, lock.key))) {
      throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
    }
    await this.boundWait(db, runner, waitMs);
    try {
      if (lock.mode === 'shared') {
        // The reader's mark once the key's share is granted, in the same statement.
        await runner.query(
          `SELECT pg_advisory_lock_shared($1::bigint) AS ok, pg_try_advisory_lock_shared($2::int, $3::int) AS marked`,
          [id, ...readerMark(lock.key)],
          true,
        );
      } else {
        await runner.query(`SELECT pg_advisory_lock($1::bigint) AS ok`, [id], true);
      }
    } catch (err) {
      if (!isLockBusy(err)) throw err;
      await runner.query(`SELECT ${this.restoreAll(db)}`, [], true);
      return false;
    }
    if (lock.mode === 'shared') await this.checkReader(db, runner, lock, false);
    else await runner.query(`SELECT ${PG_RESTORE_LOCK_TIMEOUT}`, [], true);
    return true;
  }

  /**
   * A reader that holds the key's lock in share mode: refused (lock given back) if counted
   * holders share it too. In the same statement the session gets its bound (`bind`, after a
   * try) or its `lock_timeout` back (after a wait).
   */
  private async checkReader(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    bind: boolean,
  ): Promise<void> {
    const [classid] = slotIds(lock.key, 1, 0);
    const settings = bind ? this.bindSql(db, 2) : `, ${PG_RESTORE_LOCK_TIMEOUT}`;
    const params: unknown[] = [classid];
    if (bind && pgHasIdleSessionTimeout(db.server))
      params.push(pgMilliseconds(this.sessionTimeoutMs));
    const result = await runner.query(
      `SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE ${pgSlotsOf('l', '$1')}) AS counted${settings}`,
      params,
      true,
    );
    if (!truthy(result.records[0]?.counted)) return;
    await runner.query(
      `SELECT ${UNLOCK_READER}, ${this.restoreAll(db)}`,
      readerIds(lock.key),
      true,
    );
    throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
  }

  /**
   * Postgres, a counted lock: the lowest free slot, then the key's lock in share mode, then the
   * check that every holder asked the same N. With a wait, while no slot is free it waits for
   * one slot after another in the lock queue (a short `lock_timeout` each, growing), looking at
   * all of them between waits: the lock manager has no "any of these" wait.
   */
  private async takeSlot(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
  ): Promise<number | null> {
    const deadline = monotonicNow() + waitMs;
    const bounded = waitMs > 0;
    if (bounded) await this.boundWait(db, runner, Math.min(waitMs, SLOT_WAIT_MIN_MS));
    try {
      for (let attempt = 0; ; attempt++) {
        const free = await runner.query(
          `SELECT i AS slot FROM generate_series(0, $2::int - 1) i WHERE pg_try_advisory_lock($1::int, $3::int + i) LIMIT 1`,
          [slotIds(lock.key, lock.permits, 0)[0], lock.permits, lock.permits * SLOT_SPACE],
          true,
        );
        let slot: number | null = free.records.length > 0 ? Number(free.records[0].slot) : null;
        const left = deadline - monotonicNow();
        if (slot === null && bounded && left > 0) {
          slot = attempt % lock.permits;
          const chunk = Math.min(left, SLOT_WAIT_MAX_MS, SLOT_WAIT_MIN_MS * 2 ** attempt);
          try {
            await runner.query(
              `SELECT set_config('lock_timeout', $3, false), pg_advisory_lock($1::int, $2::int) AS ok`,
              [...slotIds(lock.key, lock.permits, slot), pgMilliseconds(chunk)],
              true,
            );
          } catch (err) {
            if (!isLockBusy(err)) throw err;
            continue;
          }
        }
        if (slot === null) {
          if (bounded) await runner.query(`SELECT ${this.restoreAll(db)}`, [], true);
          return null;
        }
        await this.joinSlotHolders(db, runner, lock, slot, bounded);
        return slot;
      }
    } catch (err) {
      if (!bounded || !isLockBusy(err)) throw err;
      await runner.query(`SELECT ${this.restoreAll(db)}`, [], true);
      return null;
    }
  }

  /**
   * A counted holder that got slot `slot`: shares the key's lock (a writer or mutex holding or
   * awaiting it disagrees), then checks that no other holder asked another N (a slot of another
   * count, or a reader's mark). Any disagreement gives back what it took and refuses.
   */
  private async joinSlotHolders(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    slot: number,
    waited: boolean,
  ): Promise<void> {
    const id = advisoryKey64(lock.key);
    const [classid, objid] = slotIds(lock.key, lock.permits, slot);
    const shared = await query(runner, `SELECT pg_try_advisory_lock_shared($1::bigint) AS ok`, [
      id,
    ]);
    let agreed = false;
    if (shared) {
      const settings = waited ? `, ${PG_RESTORE_LOCK_TIMEOUT}` : this.bindSql(db, 4);
      const params: unknown[] = [
        classid,
        lock.permits * SLOT_SPACE,
        (lock.permits + 1) * SLOT_SPACE,
      ];
      if (!waited && pgHasIdleSessionTimeout(db.server))
        params.push(pgMilliseconds(this.sessionTimeoutMs));
      const result = await runner.query(
        `SELECT NOT EXISTS (SELECT 1 FROM pg_locks l WHERE ${pgSlotsOf('l', '$1')} AND (l.objid < $2 OR l.objid >= $3))
            AND NOT EXISTS (SELECT 1 FROM pg_locks r WHERE ${pgMarksOf('r', '$1')}) AS agreed${settings}`,
        params,
        true,
      );
      agreed = truthy(result.records[0]?.agreed);
    }
    if (agreed) return;
    await runner.query(
      `SELECT ${shared ? 'pg_advisory_unlock_shared($3::bigint), ' : ''}pg_advisory_unlock($1::int, $2::int) AS ok, ${this.restoreAll(db)}`,
      shared ? [classid, objid, id] : [classid, objid],
      true,
    );
    throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
  }

  /**
   * MariaDB/MySQL, the session bounded first (restored on failure): a mutex's `GET_LOCK`, then
   * the check that no counted holder holds a slot of the key (see `mysql-advisory-slots.ts`);
   * a counted lock's slot.
   */
  private async takeMysql(runner: SqlRunner, lock: SessionLock): Promise<number | null> {
    await boundMysqlSession(runner, this.sessionTimeoutMs);
    const name = advisoryLockName(lock.key);
    let slot: number | null = null;
    try {
      if (lock.permits > 1) {
        slot = await takeMysqlSlot(runner, lock, name);
        return slot;
      }
      if (!(await query(runner, 'SELECT GET_LOCK(?, 0) AS ok', [name]))) return null;
      // Checked once held (a statement of its own: see mysql-advisory-slots.ts).
      const counted = await runner.query(MYSQL_SLOTS_HELD, [mysqlSlotPrefix(lock.key)], true);
      if (!truthy(counted.records[0]?.held)) {
        slot = 0;
        return slot;
      }
      await runner.query('SELECT RELEASE_LOCK(?) AS ok', [name], true);
      throw permitsDisagreement(lock.key, undefined, lock.permits, lock.mode);
    } finally {
      if (slot === null) await runner.query(`SET ${MYSQL_RESTORE_SESSION}`, [], true);
    }
  }

  /**
   * Postgres, before a wait in the lock queue: `lock_timeout` (the wait's bound) and the
   * session's bound, in one statement.
   */
  private async boundWait(db: SqlDatabase, runner: SqlRunner, waitMs: number): Promise<void> {
    const lockTimeout = waitMs > MAX_PG_LOCK_TIMEOUT_MS ? '0' : pgMilliseconds(waitMs);
    const params: unknown[] = [lockTimeout];
    if (pgHasIdleSessionTimeout(db.server)) params.push(pgMilliseconds(this.sessionTimeoutMs));
    await runner.query(
      `SELECT set_config('lock_timeout', $1, false)${this.bindSql(db, 2)}`,
      params,
      true,
    );
  }

  /** `, set_config('idle_session_timeout', $n, false)` where the server has it (PostgreSQL 14+). */
  private bindSql(db: SqlDatabase, n: number): string {
    return pgHasIdleSessionTimeout(db.server)
      ? `, set_config('idle_session_timeout', $${n}, false)`
      : '';
  }

  /** Both settings a Postgres take may have changed, back to their defaults. */
  private restoreAll(db: SqlDatabase): string {
    return pgHasIdleSessionTimeout(db.server)
      ? `${PG_RESTORE_LOCK_TIMEOUT}, ${PG_RESTORE_IDLE_TIMEOUT}`
      : PG_RESTORE_LOCK_TIMEOUT;
  }

  /**
   * Postgres: the lock lives with the session, so the connection answering is proof enough;
   * MariaDB can say who holds the name, so ask.
   */
  async probe(db: SqlDatabase, runner: SqlRunner, hold: SessionHold): Promise<boolean> {
    if (db.dialect.family === 'postgres') return connectionAnswers(runner);
    // The name this hold took: the key's (a mutex) or its slot's (a counted lock).
    return query(runner, 'SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS ok', [
      hold.permits > 1 ? mysqlSlotName(hold.key, hold.slot) : advisoryLockName(hold.key),
    ]);
  }

  async release(db: SqlDatabase, runner: SqlRunner, hold: SessionHold): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      const restore = `, ${this.restoreAll(db)}`;
      const id = advisoryKey64(hold.key);
      if (hold.permits > 1) {
        // Both, whatever the first answers (separate columns: `AND` may stop early).
        return query(
          runner,
          `SELECT pg_advisory_unlock_shared($3::bigint) AS ok, pg_advisory_unlock($1::int, $2::int) AS slot${restore}`,
          [...slotIds(hold.key, hold.permits, hold.slot), id],
        );
      }
      if (hold.mode === 'shared') {
        return query(runner, `SELECT ${UNLOCK_READER}${restore}`, readerIds(hold.key));
      }
      return query(runner, `SELECT pg_advisory_unlock($1::bigint) AS ok${restore}`, [id]);
    }
    const released =
      hold.permits > 1
        ? await releaseMysqlSlot(runner, hold.key, hold.permits, hold.slot)
        : await query(runner, 'SELECT RELEASE_LOCK(?) AS ok', [advisoryLockName(hold.key)]);
    await runner.query(`SET ${MYSQL_RESTORE_SESSION}`, [], true);
    return released;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    if (db.dialect.family === 'postgres') {
      const result = await db.exec(`SELECT 1 AS held FROM pg_locks WHERE ${PG_LOCK_OF}`, [
        ...pgLockIds(key),
      ]);
      return result.records.length > 0;
    }
    const result = await db.exec(MYSQL_KEY_HELD, [advisoryLockName(key), mysqlSlotPrefix(key)]);
    return truthy(result.records[0]?.used) || truthy(result.records[0]?.counted);
  }

  /** Postgres: requests for the key's lock or its slots waiting in the lock queue. */
  async waiting(db: SqlDatabase, key: string): Promise<number | undefined> {
    if (db.dialect.family !== 'postgres') return undefined;
    const result = await db.exec(
      `SELECT count(*) AS waiting FROM pg_locks WHERE ${PG_ANY_OF.replace(/\bgranted\b/, 'NOT granted')}`,
      [...pgLockIds(key), slotIds(key, 1, 0)[0]],
    );
    return Number(result.records[0]?.waiting ?? 0);
  }

  /**
   * Postgres: the sessions holding the key's lock, their mode, and for a counted lock its N
   * and slots (from the slot ids). MariaDB: the mutex's holder, or the counted holders' slots.
   */
  async holders(db: SqlDatabase, key: string): Promise<SessionHolders | undefined> {
    if (db.dialect.family !== 'postgres') {
      return mysqlAdvisoryHolders(db, key, advisoryLockName(key));
    }
    const result = await db.exec(
      `SELECT pid, mode, objsubid, objid FROM pg_locks WHERE ${PG_ANY_OF}`,
      [...pgLockIds(key), slotIds(key, 1, 0)[0]],
    );
    const rows = result.records as Array<{
      pid: unknown;
      mode: unknown;
      objsubid: unknown;
      objid: unknown;
    }>;
    const keyHolders = rows.filter((r) => Number(r.objsubid) === 1);
    const slots = rows
      .filter((r) => Number(r.objsubid) === 2 && Number(r.objid) >= SLOT_SPACE)
      .map((r) => Number(r.objid));
    const holders = new Set(keyHolders.map((r) => String(r.pid))).size;
    if (slots.length > 0) {
      return {
        holders,
        mode: 'exclusive',
        permits: Math.floor(slots[0] / SLOT_SPACE),
        slots: slots.map((objid) => objid % SLOT_SPACE).sort((a, b) => a - b),
      };
    }
    const shared = keyHolders.some((r) => r.mode === 'ShareLock');
    return { holders, mode: shared ? 'shared' : 'exclusive', permits: 1 };
  }

  /** Ends every session holding the lock (or a slot of it), looked up and ended by the server. */
  async forceRelease(db: SqlDatabase, key: string): Promise<boolean> {
    if (db.dialect.family !== 'postgres') {
      return killMysqlAdvisoryHolders(db, key, advisoryLockName(key));
    }
    const result = await db.exec(
      `SELECT ${pgTerminate(db, 'pid')} AS ended FROM (SELECT DISTINCT pid FROM pg_locks WHERE ${PG_ANY_OF}) holders`,
      [...pgLockIds(key), slotIds(key, 1, 0)[0]],
    );
    return result.records.length > 0;
  }
}

/** Runs `sql` on `runner`; its first row's `ok` as a boolean. */
async function query(runner: SqlRunner, sql: string, params: unknown[]): Promise<boolean> {
  const result = await runner.query(sql, params, true);
  return truthy(result.records[0]?.ok);
}

/**
 * The `pg_locks` condition for the granted session advisory lock of a key in this database
 * (advisory locks are per database: the same number elsewhere is another lock); its two
 * parameters are {@link pgLockIds}.
 */
const PG_LOCK_OF =
  `locktype = 'advisory' AND granted AND objsubid = 1 AND classid = ? AND objid = ? ` +
  `AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

/** `classid` and `objid` of `key`'s advisory lock in `pg_locks` (the 64-bit id's two halves). */
function pgLockIds(key: string): [number, number] {
  return pgAdvisoryIds(advisoryKey64(key));
}

/** `classid` and `objid` of a 64-bit advisory id (a decimal string) in `pg_locks`: its two halves. */
export function pgAdvisoryIds(id: string): [number, number] {
  const unsigned = BigInt.asUintN(64, BigInt(id));
  return [Number(unsigned >> 32n), Number(unsigned & 0xffffffffn)];
}

/**
 * The `pg_locks` condition (on rows aliased `alias`) for the granted slot locks of a key's
 * counted locks, whatever their N, in this database; `param` is the first of {@link slotIds}.
 */
function pgSlotsOf(alias: string, param: string): string {
  return `${pgTwoIntOf(alias, param)} AND ${alias}.objid >= ${SLOT_SPACE}`;
}

/** As {@link pgSlotsOf}, for the key's granted reader marks (held by its readers). */
function pgMarksOf(alias: string, param: string): string {
  return `${pgTwoIntOf(alias, param)} AND ${alias}.objid = ${READER_MARK}`;
}

/** Granted two-int advisory locks of classid `param` in this database (slots and marks). */
function pgTwoIntOf(alias: string, param: string): string {
  return (
    `${alias}.locktype = 'advisory' AND ${alias}.granted AND ${alias}.objsubid = 2 AND ${alias}.classid = ${param} ` +
    `AND ${alias}.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
  );
}

/** A reader's release: the key's share, then its mark; parameters {@link readerIds}. */
const UNLOCK_READER = `pg_advisory_unlock_shared($1::bigint) AS ok, pg_advisory_unlock_shared($2::int, $3::int) AS marked`;

/** The parameters of {@link UNLOCK_READER}: the key's 64-bit id, then its mark's two ints. */
function readerIds(key: string): [string, number, number] {
  return [advisoryKey64(key), ...readerMark(key)];
}

/** The two-int advisory id of `key`'s reader mark (the slots' hash, {@link READER_MARK}). */
function readerMark(key: string): [number, number] {
  return [slotIds(key, 1, 0)[0], READER_MARK];
}

/** Whether counted holders hold slots of `key` now (a mutex or writer then disagrees). */
async function hasSlotHolders(db: SqlDatabase, key: string): Promise<boolean> {
  const result = await db.exec(`SELECT 1 AS held FROM pg_locks l WHERE ${pgSlotsOf('l', '?')}`, [
    slotIds(key, 1, 0)[0],
  ]);
  return result.records.length > 0;
}

/** The key's lock or any of its slots, granted; parameters: {@link pgLockIds}, then the slots' classid. */
const PG_ANY_OF =
  `locktype = 'advisory' AND granted ` +
  `AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ` +
  `AND ((objsubid = 1 AND classid = ? AND objid = ?) OR (objsubid = 2 AND classid = ?))`;

/**
 * The two-int advisory id of slot `slot` of a counted lock of `permits` on `key`: a 31-bit hash
 * of the key (non-negative, so `pg_locks` shows the same `classid` as the `int` passed; a
 * collision of two keys makes their slots exclude each other, never admits more), and
 * `permits * SLOT_SPACE + slot` (`objid`).
 */
function slotIds(key: string, permits: number, slot: number): [number, number] {
  const hash = createHash('sha256').update(key, 'utf8').digest().readUInt32BE(8) & 0x7fffffff;
  return [hash, permits * SLOT_SPACE + slot];
}

/** PostgreSQL: `name` back to what `RESET` would give it (the session's default). */
function pgRestore(name: string): string {
  return `set_config('${name}', (SELECT reset_val FROM pg_settings WHERE name = '${name}'), false)`;
}

/** Signed 64-bit advisory key for Postgres (first 8 bytes of SHA-256), as a decimal string. */
export function advisoryKey64(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest().readBigInt64BE(0).toString();
}

/** MariaDB/MySQL GET_LOCK name: at most 64 characters, from SHA-256. */
export function advisoryLockName(key: string): string {
  return `dl:${createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 60)}`;
}
