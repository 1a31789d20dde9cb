import type { GrantRequest, LockMode, StoreLockInfo } from '../../core/contract/lock-backend';
import type { SqlDatabase } from './sql-database';
import type { SqlFamily } from './sql-dialect';
import type { SqlRunner } from './typeorm-types';

/**
 * How the SQL backend holds a lock: only the statements that take, check and release it.
 * Everything else (finding the DataSource, the key's row, pinned connections, fences, loss
 * detection, waiting, ping, close) is {@link SqlLockBackend}'s, written once for all of them.
 * Modelled on madelson/DistributedLock's `IDbSynchronizationStrategy`.
 */
export type SqlLockStrategy = LeaseStrategy | SessionStrategy;

/**
 * Which shared and counted locks a strategy grants (`LockBackendCapabilities.shared` and
 * `.permits` of its backend). Static: the backend declares it before its DataSource is found.
 */
export interface SharingSupport {
  /** Grants `mode: 'shared'` (readers together, a writer alone, writer preference). */
  readonly shared: boolean;
  /** Grants `permits` above 1 (counted locks, a slot per holder). */
  readonly permits: boolean;
}

/** What every strategy answers. */
interface StrategyBase {
  /** Shared and counted locks it grants; absent: neither (the engine refuses them before any I/O). */
  readonly sharing?: SharingSupport;
  /** Whether anyone holds `key` right now, asked on a pooled connection. */
  isLocked(db: SqlDatabase, key: string): Promise<boolean>;
  /**
   * Frees `key` whoever holds it (operators only); `true` when a holder was removed. Fences
   * keep rising, and the stale holder's next renewal fails.
   */
  forceRelease(db: SqlDatabase, key: string): Promise<boolean>;
}

/**
 * A lock stored as a lease in the key's row (owner, expiry, fence): the database expires it by
 * itself, so every statement runs on any pooled connection.
 */
export interface LeaseStrategy extends StrategyBase {
  readonly kind: 'lease';
  /**
   * Takes the key for `request.token` for `request.ttlMs` in `request.mode` with
   * `request.permits` (creating its row if it has none) if the key admits it, and returns the new
   * fence and the slot (`permit`); `null` when it is busy. Rejects with `LockConfigError` when
   * the key's holders agreed on other `permits`.
   */
  take(db: SqlDatabase, request: GrantRequest): Promise<LeaseGrant | null>;
  /** Extends the lease to `ttlMs` if `token` still holds it (in whatever mode). */
  renew(db: SqlDatabase, key: string, token: string, ttlMs: number): Promise<boolean>;
  /**
   * {@link renew} of many leases in a few statements: one result per request, in order (an
   * `Error` for a lease whose statement failed); rejects when every statement failed.
   */
  renewMany(db: SqlDatabase, requests: readonly GrantRequest[]): Promise<Array<boolean | Error>>;
  /** Frees the key if `token` holds it; `false` when it did not (anymore). */
  release(db: SqlDatabase, key: string, token: string): Promise<boolean>;
  /** What the key's row says: holder, fence, lease left. */
  inspect(db: SqlDatabase, key: string): Promise<StoreLockInfo>;
  /**
   * Called by a waiter after each failed take, before it sleeps: what it learnt (the lease left
   * on the key, so it can sleep until the lease runs out) and whether it now marks the key as
   * awaited by a writer (writer preference: new readers then wait behind it; the waiter must
   * {@link withdraw} the mark when it is done waiting, granted or not). Rejects with
   * `LockConfigError` when the key's holders agreed on other `permits`.
   */
  contend(db: SqlDatabase, request: GrantRequest): Promise<LeaseContention>;
  /** Removes the writer mark {@link contend} set for `token`; `true` when there was one. */
  withdraw(db: SqlDatabase, key: string, token: string): Promise<boolean>;
}

/** A lease taken: its fence and slot (`0..permits-1`; 0 for a mutex or a reader). */
export interface LeaseGrant {
  readonly fence: number;
  readonly permit: number;
}

/** What a waiter learnt about a busy key ({@link LeaseStrategy.contend}). */
export interface LeaseContention {
  /** Lease left on the key, ms, when the store could tell. */
  readonly remainingMs?: number;
  /** Whether the key carries this waiter's writer mark now. */
  readonly marked: boolean;
}

/** What a session strategy can do on one database family (the backend's capabilities follow). */
export interface SessionCapabilities {
  /** Grants `mode: 'shared'` (readers together, a writer alone, writer preference). */
  readonly shared: boolean;
  /** Grants `permits` above 1 (each grant with its slot). */
  readonly permits: boolean;
  /** The most `permits` it grants one key, where below the engine's own limit. */
  readonly maxPermits?: number;
  /**
   * The database can wait for a busy lock itself (`take` with `waitMs > 0`): waiters then queue
   * in the database (`waiting: 'queue'`) instead of polling.
   */
  readonly waitsInDatabase: boolean;
}

/** One session lock asked for: its key and how it shares it. */
export interface SessionLock {
  readonly key: string;
  readonly mode: LockMode;
  /** Holders the key admits at once (1: a mutex, or a shared lock). */
  readonly permits: number;
}

/** A session lock held on a pinned connection: what was asked for, and the slot it got. */
export interface SessionHold extends SessionLock {
  /** `0..permits-1` (0 for a mutex or a shared lock). */
  readonly slot: number;
}

/** Who holds a key now, as far as the database can tell (for `inspect`). */
export interface SessionHolders {
  readonly holders: number;
  readonly mode?: LockMode;
  readonly permits?: number;
  readonly slots?: readonly number[];
}

/**
 * A lock that lives as long as one database session: the backend pins a connection for it,
 * draws its fence, watches the connection and gives it back after `release`. The strategy
 * bounds the session on the server (`sessionTimeout`) when it takes the lock, so a holder the
 * server stops hearing from loses it, and restores the connection's defaults when it releases
 * (or fails to take) it.
 */
export interface SessionStrategy extends StrategyBase {
  readonly kind: 'session';
  /** What it can grant on `family`. */
  supports(family: SqlFamily): SessionCapabilities;
  /**
   * Takes `lock` on `runner`, waiting up to `waitMs` in the database (`0`: no wait;
   * `Infinity`: until granted or the session is ended): the slot `runner` now holds, or `null`
   * when busy. On `null` or an error the connection is left as it was. Throws
   * `LockConfigError` (field `permits`, the connection left as it was) when the key's holders
   * or waiters asked for other `permits`: never over-admitted.
   */
  take(
    db: SqlDatabase,
    runner: SqlRunner,
    lock: SessionLock,
    waitMs: number,
  ): Promise<number | null>;
  /**
   * Whether `runner` still holds `hold`. Absent: the connection answering is proof enough (the
   * lock lives exactly as long as it). Rejecting means the connection is gone.
   */
  probe?(db: SqlDatabase, runner: SqlRunner, hold: SessionHold): Promise<boolean>;
  /**
   * Releases `hold` on `runner`; `false` when it was not held there. Rejecting means the
   * connection is gone, and the lock with it.
   */
  release(db: SqlDatabase, runner: SqlRunner, hold: SessionHold): Promise<boolean>;
  /** Callers waiting in the database for `key` (`undefined` where they do not wait there). */
  waiting?(db: SqlDatabase, key: string): Promise<number | undefined>;
  /** Holders of `key` now, their mode, permits and slots (`undefined`: the database cannot tell). */
  holders?(db: SqlDatabase, key: string): Promise<SessionHolders | undefined>;
}
