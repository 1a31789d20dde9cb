import { createHash } from 'node:crypto';
import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import type {
  SessionCapabilities,
  SessionHold,
  SessionLock,
  SessionStrategy,
} from './sql-lock-strategy';
import { isDeadlock, isLockBusy } from './driver-errors';
import type { SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';
import {
  boundMysqlSession,
  killHolderOf,
  MAX_MYSQL_WAIT_S,
  MYSQL_RESTORE_SESSION,
  pgMilliseconds,
  pgTerminate,
} from './sql-sessions';
import type { SqlRunner } from './typeorm-types';
import type { SessionHolders } from './sql-lock-strategy';
import type { SqlFamily } from './sql-dialect';
import {
  checkAgreement,
  endSharers,
  isShared,
  lockFreeSlot,
  lockRowShared,
  makeSlotRows,
  sharingHolders,
  tidyIfUnused,
  waitForSlot,
  type RowLock,
} from './for-update-sharing';
import {
  countRowKey,
  lockFreeSlotMysql,
  makeSlotRowsMysql,
  pollForSlotMysql,
  prepareCountRow,
} from './mysql-counted-rows';

/** Largest PostgreSQL `lock_timeout`, ms (an int); longer waits are unbounded (`0`). */
const MAX_PG_LOCK_TIMEOUT_MS = 2_147_483_647;
/** A try without waiting that finds the row deleted under it tries this many times in all. */
const NOWAIT_ATTEMPTS = 3;
/**
 * A sharer that must stand back (PostgreSQL: a writer queued on the row, or no free slot) looks
 * again after this long at first, ms (doubling, with jitter) ...
 */
const STAND_BACK_MIN_MS = 5;
/** ... and at most after this long, ms. */
const STAND_BACK_MAX_MS = 100;
/** A counted waiter waits for one slot row at a time for at least this long, ms (doubling) ... */
const SLOT_WAIT_MIN_MS = 20;
/** ... and at most this long, then looks at all of them again, ms. */
const SLOT_WAIT_MAX_MS = 500;

/**
 * `strategy: 'for-update'` (Postgres, MariaDB): the pinned connection holds an open transaction
 * with `SELECT ... FOR UPDATE` on the key's row. Take without waiting = `NOWAIT`; with a wait,
 * the database's own lock wait (Postgres `lock_timeout`, MariaDB `WAIT n`), so waiters queue in
 * the database. Release = delete the row and commit, so the table keeps no row per key once
 * its lock is released; a waiter whose wait ends on the deleted row makes it again and locks it
 * (the row lock alone decides who holds the key). If the connection dies, the database
 * releases the lock (and a row left behind is deleted by the key's next holder).
 *
 * The server ends a holder it stops hearing from after `sessionTimeoutMs`: Postgres
 * `idle_in_transaction_session_timeout` (transaction-local, so the pooled connection gets its
 * default back at commit), MariaDB `wait_timeout` (restored at release). On MariaDB the holder
 * also takes a user-level lock named after the row (a marker): the server can then say which
 * session holds the row, which InnoDB itself only tells for rows someone waits on.
 *
 * `mode: 'shared'`: readers share-lock the row (PostgreSQL `FOR SHARE`, MariaDB `LOCK IN SHARE
 * MODE`), a writer locks it `FOR UPDATE` as a mutex does. InnoDB queues a new share request
 * behind a waiting writer (writer preference); PostgreSQL grants it beside other readers however
 * long a writer has waited, so there a reader that sees a writer queued on the row stands back
 * and looks again shortly. Counted locks (`permits`): the holder share-locks the key's row too,
 * then locks the lowest free of N slot rows `FOR UPDATE SKIP LOCKED`; with none free it waits
 * for one slot row after another, briefly each (PostgreSQL), or looks again after short pauses
 * (MariaDB), while its wait lasts (the database has no "any of these rows" wait). Sharers
 * register so the server can tell who they are, and holders that disagree about `permits` are
 * refused: see for-update-sharing.ts, and mysql-counted-rows.ts for MariaDB's count row.
 */
export class ForUpdateStrategy implements SessionStrategy {
  readonly kind = 'session';

  constructor(private readonly sessionTimeoutMs: number) {}

  supports(family: SqlFamily): SessionCapabilities {
    return { shared: true, permits: family !== 'sqlite', waitsInDatabase: true };
  }

  /**
   * Locks the key's row (and a slot row), remaking it when its holder deleted it as a wait
   * ended; a sharer told to stand back tries again after a short pause while its wait lasts.
   */
  async take(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
  ): Promise<number | null> {
    const deadline = monotonicNow() + waitMs;
    for (let attempt = 1; ; attempt++) {
      const [outcome, slot] = await this.takeOnce(db, runner, lock, waitMs, attempt);
      if (outcome === 'locked') return slot;
      if (outcome === 'retry') {
        waitMs = deadline - monotonicNow();
        if (waitMs <= 0) return null;
        continue;
      }
      if (outcome === 'stand-back') {
        const pause = Math.min(STAND_BACK_MAX_MS, STAND_BACK_MIN_MS * 2 ** attempt);
        if (deadline - monotonicNow() <= pause) return null;
        await sleep(pause * (0.5 + Math.random()));
        waitMs = deadline - monotonicNow();
        continue;
      }
      if (outcome !== 'gone') return null;
      // The row was deleted by the holder that released it (a wait ends on it then): the key is
      // free. The next attempt makes it again and locks it like any other row.
      if (waitMs <= 0 && attempt >= NOWAIT_ATTEMPTS) return null;
      if (waitMs > 0) {
        waitMs = deadline - monotonicNow();
        if (waitMs <= 0) return null;
        // MariaDB waits in whole seconds: below one, a last try without waiting
        if (db.dialect.family !== 'postgres' && waitMs < 1_000) waitMs = 0;
      }
    }
  }

  /**
   * Makes the key's row if it is missing, then, in one transaction, tries to lock it; anything
   * but `'locked'` ends the transaction. The row is made on this same connection in autocommit,
   * before the transaction (which must hold no row lock of its own across a wait), so it costs
   * no second connection. On MariaDB the session's row-lock waits are bounded by the caller's
   * wait first: an insert of a row that another caller has just made and locked waits for that
   * holder like any waiter, never for InnoDB's own 50 s default.
   */
  private async takeOnce(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
    attempt: number,
  ): Promise<[RowLock, number]> {
    const { key, mode } = lock;
    const postgres = db.dialect.family === 'postgres';
    const mutex = mode === 'exclusive' && lock.permits === 1;
    /** MariaDB counted: its registration (the slot marker) comes with the slot, checked after. */
    const mysqlCounted = !postgres && lock.permits > 1;
    let held = false;
    let inTransaction = false;
    /** This take share-locked the key's row (and so may have kept its last holder from tidying). */
    let shared = false;
    if (!postgres) await boundMysqlSession(runner, this.sessionTimeoutMs, waitMs);
    try {
      if (!(await makeRow(db, runner, key))) return ['busy', 0];
      if (mysqlCounted && !(await prepareCountRow(db, runner, lock))) return ['busy', 0];
      // READ COMMITTED whatever the DataSource's default: a lock wait that ends on a row its
      // holder deleted must find it gone, not fail to serialise (40001 under REPEATABLE READ),
      // and on InnoDB lock no gap that would stop other keys' rows from being made.
      await runner.startTransaction(isolationFor(db));
      inTransaction = true;
      if (postgres) await this.boundPgTransaction(runner, waitMs);
      const wait = this.lockMode(postgres, waitMs);
      // A mutex about to wait for counted holders would wait in vain: refused first.
      if (mutex && waitMs > 0) await checkAgreement(db, lock, runner);
      const outcome = mutex
        ? await lockRow(db, runner, key, wait)
        : await lockRowShared(db, runner, lock, wait);
      shared = !mutex && (outcome === 'locked' || outcome === 'stand-back');
      // The failed NOWAIT ended the transaction's use: the check goes on a pooled connection.
      if (outcome === 'busy' && mutex && waitMs <= 0) await checkAgreement(db, lock);
      if (outcome !== 'locked') return [outcome, 0];
      if (!mutex && !mysqlCounted) await checkAgreement(db, lock, runner);
      const freeSlot = postgres ? lockFreeSlot : lockFreeSlotMysql;
      let slot = lock.permits > 1 ? await freeSlot(db, runner, lock) : 0;
      if (slot === null) {
        // Slot rows exist while the key is shared (their holders leave them for the next);
        // the first sharer, or one after the last left, makes the missing ones.
        await (postgres ? makeSlotRows(db, lock) : makeSlotRowsMysql(db, lock));
        slot = await freeSlot(db, runner, lock);
      }
      if (slot === null && waitMs > 0) {
        const chunk = Math.min(waitMs, SLOT_WAIT_MAX_MS, SLOT_WAIT_MIN_MS * 2 ** attempt);
        if (postgres) {
          // All held: wait in the lock queue for one slot row after another, briefly each.
          const next = attempt % lock.permits;
          if (!(await waitForSlot(db, runner, lock, next, chunk))) return ['retry', 0];
          slot = next;
        } else {
          slot = await pollForSlotMysql(db, runner, lock, chunk);
          if (slot === null) return ['retry', 0];
        }
      }
      if (slot === null) return ['busy', 0];
      // Registered now (its slot marker): a reader registered before is seen here.
      if (mysqlCounted) await checkAgreement(db, lock);
      held = true;
      return ['locked', slot];
    } finally {
      // A failure here rejects the take, and the backend then discards the connection: a
      // session left in its transaction must never go back to the pool.
      if (!held) {
        if (inTransaction) await runner.rollbackTransaction();
        // MariaDB: the session's bounds go first (a 0 s row-lock wait breaks the tidy's
        // SKIP LOCKED read there: see mysql-counted-rows.ts), then its markers.
        if (!postgres) await restoreMysql(db, runner, lock);
        if (shared || mysqlCounted) await tidyIfUnused(db, runner, lock);
      }
    }
  }

  async release(db: SqlDatabase, runner: SqlRunner, hold: SessionHold): Promise<boolean> {
    const { key, mode } = hold;
    const postgres = db.dialect.family === 'postgres';
    // The marker goes first: it never outlives the row lock it names.
    if (!postgres) await restoreMysql(db, runner, hold);
    if (mode === 'shared' || hold.permits > 1) {
      // A slot row stays for the next holder (one waiting for it gets it at the commit); once
      // this sharer shares the key no more, the key's rows go if no one else uses them.
      await runner.commitTransaction();
      await tidyIfUnused(db, runner, hold);
      return true;
    }
    // Deleted by the holder, in its transaction: the row lock guards it until the commit.
    // MariaDB: with the key's count row if a counted taker made it and gave up (no counted
    // holder can share-lock it while this holder keeps the key's row, so this waits for no one
    // but a taker making it, a few statements long).
    await runner.query(
      postgres
        ? `DELETE FROM ${db.table} WHERE lock_key = $1`
        : `DELETE FROM ${db.table} WHERE lock_key IN (?, ?)`,
      postgres ? [storedKey(key)] : [storedKey(key), countRowKey(key)],
      true,
    );
    await runner.commitTransaction();
    return true;
  }

  async isLocked(db: SqlDatabase, key: string): Promise<boolean> {
    if (await isShared(db, key)) return true;
    // A shared row lock that skips locked rows, in one autocommit statement: no row back (for
    // an existing row) means someone holds it FOR UPDATE. Shared locks do not conflict with
    // each other, so concurrent isLocked calls cannot see one another as holders.
    const mode =
      db.dialect.family === 'postgres'
        ? 'FOR KEY SHARE SKIP LOCKED'
        : 'LOCK IN SHARE MODE SKIP LOCKED';
    const free = await db.exec(`SELECT lock_key FROM ${db.table} WHERE lock_key = ? ${mode}`, [
      storedKey(key),
    ]);
    if (free.records.length > 0) return false;
    return db.rowExists(key);
  }

  /**
   * Postgres: waiters on the holder's transaction plus waiters queued on the row's tuple lock
   * (the first waiter holds that one while it waits for the holder). MariaDB: sessions running
   * this key's locking statement (visible to the same database user, or all with PROCESS),
   * except those that cannot wait: a `NOWAIT` try, or a `SKIP LOCKED` probe such as the one
   * `inspect` runs beside this count (on a loaded host the count once saw it as a waiter).
   */
  async waiting(db: SqlDatabase, key: string): Promise<number> {
    if (db.dialect.family === 'postgres') {
      const result = await db.exec(
        `SELECT (SELECT count(*) FROM pg_locks l WHERE l.locktype = 'transactionid' AND NOT l.granted AND l.transactionid = t.xmax)
              + (SELECT count(*) FROM pg_locks l WHERE l.locktype = 'tuple' AND NOT l.granted
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND l.relation = ?::regclass
                   AND l.page = (t.ctid::text::point)[0]::int AND l.tuple = (t.ctid::text::point)[1]::int) AS waiting
           FROM ${db.table} t WHERE t.lock_key = ?`,
        [db.table, storedKey(key)],
      );
      return Number(result.records[0]?.waiting ?? 0);
    }
    const row = `%FROM ${db.table} WHERE lock_key = '${storedKey(key)}'`;
    const result = await db.exec(
      `SELECT COUNT(*) AS waiting FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND COMMAND = 'Query' AND (INFO LIKE ? OR INFO LIKE ?)
         AND INFO NOT LIKE '%SKIP LOCKED%' AND INFO NOT LIKE '%NOWAIT%'`,
      [`${row} FOR UPDATE%`, `${row} LOCK IN SHARE MODE%`],
    );
    return Number(result.records[0]?.waiting ?? 0);
  }

  /**
   * Ends the session holding the row, and only that one. Postgres: the transaction whose id is
   * the row's locker (`xmax`), looked up and ended in one statement that also proves, by a
   * shared lock that skips locked rows, that the row is locked right now. MariaDB: the session
   * holding the row's marker.
   */
  async forceRelease(db: SqlDatabase, key: string): Promise<boolean> {
    const readersEnded = await endSharers(db, key);
    if (db.dialect.family !== 'postgres') {
      return (await killHolderOf(db, rowMarker(db, key))) || readersEnded;
    }
    const result = await db.exec(
      `WITH free AS (SELECT lock_key FROM ${db.table} WHERE lock_key = ? FOR KEY SHARE SKIP LOCKED)
       SELECT ${pgTerminate(db, 'l.pid')} AS ended
         FROM ${db.table} t
         JOIN pg_locks l ON l.locktype = 'transactionid' AND l.granted AND l.mode = 'ExclusiveLock' AND l.transactionid = t.xmax
        WHERE t.lock_key = ? AND NOT EXISTS (SELECT 1 FROM free)`,
      [storedKey(key), storedKey(key)],
    );
    return result.records.length > 0 || readersEnded;
  }

  /** The key's sharers (readers, counted holders and their slots); `undefined` for a writer. */
  holders(db: SqlDatabase, key: string): Promise<SessionHolders | undefined> {
    return sharingHolders(db, key);
  }

  /**
   * Postgres, in the lock's transaction (both settings transaction-local): the server ends the
   * session once it idles in it for `sessionTimeoutMs`, and waits for the row at most `waitMs`.
   */
  private async boundPgTransaction(runner: SqlRunner, waitMs: number): Promise<void> {
    const idle = `set_config('idle_in_transaction_session_timeout', $1, true)`;
    if (waitMs <= 0) {
      await runner.query(`SELECT ${idle}`, [pgMilliseconds(this.sessionTimeoutMs)], true);
      return;
    }
    const lockTimeout = waitMs > MAX_PG_LOCK_TIMEOUT_MS ? '0' : pgMilliseconds(waitMs);
    await runner.query(
      `SELECT ${idle}, set_config('lock_timeout', $2, true)`,
      [pgMilliseconds(this.sessionTimeoutMs), lockTimeout],
      true,
    );
  }

  /** The clause after `FOR UPDATE`: `NOWAIT`, Postgres' own wait, or MariaDB `WAIT n`. */
  private lockMode(postgres: boolean, waitMs: number): string {
    if (waitMs <= 0) return 'NOWAIT';
    if (postgres) return ''; // lock_timeout bounds it
    // a computed integer, not input; below a second the backend polls with NOWAIT instead
    return `WAIT ${Math.min(MAX_MYSQL_WAIT_S, Math.max(1, Math.floor(waitMs / 1_000)))}`;
  }
}

/**
 * Locks the key's row in the open transaction: `'locked'`, `'busy'`, or `'gone'` when there is
 * no row (its holder deleted it as it released). MariaDB takes the row's marker in the same
 * statement, once the row is locked (never for a row that is not there).
 */
async function lockRow(
  db: SqlDatabase,
  runner: SqlRunner,
  key: string,
  mode: string,
): Promise<RowLock> {
  const postgres = db.dialect.family === 'postgres';
  const sql = postgres
    ? `SELECT lock_key FROM ${db.table} WHERE lock_key = $1 FOR UPDATE ${mode}`
    : `SELECT lock_key, GET_LOCK(?, 0) AS marked FROM ${db.table} WHERE lock_key = ? FOR UPDATE ${mode}`;
  const params = postgres ? [storedKey(key)] : [rowMarker(db, key), storedKey(key)];
  try {
    const result = await runner.query(sql.trim(), params, true);
    return result.records.length > 0 ? 'locked' : 'gone';
  } catch (err) {
    if (isLockBusy(err)) return 'busy';
    // InnoDB: while a deleted row is made again, the insert (on a pooled connection) and the
    // waiters woken by the delete queue on the same record, and the server may break that
    // cycle by rolling one transaction back. Ours then holds nothing: the row is being remade.
    if (isDeadlock(err)) return 'gone';
    throw db.explain(err);
  }
}

/**
 * Makes the (free) row of `key` on `runner`, in autocommit, if it is missing. `false` when the
 * row is there but its holder kept it locked for the whole wait the session allows (MariaDB's
 * insert waits for a row someone holds FOR UPDATE): the key is busy. A deadlock is no failure:
 * the waiters a release woke all remake the row its holder deleted, their inserts share the
 * deleted record, and the server rolls all but one back; the one left makes the row, and the
 * locking read that follows decides (a row still missing there is tried again).
 */
async function makeRow(db: SqlDatabase, runner: SqlRunner, key: string): Promise<boolean> {
  try {
    await db.createRowIfMissing(key, runner);
    return true;
  } catch (err) {
    if (isLockBusy(err)) return false;
    if (isDeadlock(err)) {
      await sleep(Math.random() * 5); // the woken waiters come back one at a time
      return true;
    }
    throw db.explain(err);
  }
}

/**
 * `'READ COMMITTED'` when a PostgreSQL DataSource sets another isolation level for its
 * transactions (an extra statement then), else the default: PostgreSQL's own is READ COMMITTED,
 * and on MariaDB the session is set to it with the take's other settings (boundMysqlSession).
 */
function isolationFor(db: SqlDatabase): 'READ COMMITTED' | undefined {
  const level = db.dataSource.options.isolationLevel;
  return db.dialect.family === 'postgres' && level !== undefined && level !== 'READ COMMITTED'
    ? 'READ COMMITTED'
    : undefined;
}

/**
 * MariaDB: in one statement, frees the row's marker (a no-op when it is not ours; a reader's or
 * counted holder's: every user-level lock of the session, which holds this lock's marker only)
 * and gives the connection its usual `wait_timeout` back.
 */
async function restoreMysql(db: SqlDatabase, runner: SqlRunner, lock: SessionLock): Promise<void> {
  const { key, mode } = lock;
  if (mode === 'shared' || lock.permits > 1) {
    await runner.query(
      `SET ${MYSQL_RESTORE_SESSION}, @ndl_marker_released = RELEASE_ALL_LOCKS()`,
      [],
      true,
    );
    return;
  }
  await runner.query(
    `SET ${MYSQL_RESTORE_SESSION}, @ndl_marker_released = RELEASE_LOCK(?)`,
    [rowMarker(db, key)],
    true,
  );
}

/**
 * MariaDB: the name of the user-level lock a `for-update` holder keeps beside the row (at most
 * 64 characters). User-level locks are server-wide, so it names the database and the table too.
 */
export function rowMarker(db: SqlDatabase, key: string): string {
  const digest = createHash('sha256')
    .update(`${db.server.database}\u0000${db.tableName}\u0000${key}`, 'utf8')
    .digest('hex');
  return `dlr:${digest.slice(0, 60)}`;
}
