/** Options accepted by `LockService.acquire`/`tryAcquire`/`withLock`. */
export interface LockOptions {
  /** Backend name from `LockModule.forRoot({ backends })`; defaults to the module's default backend. */
  backend?: string;
  /**
   * Lease in ms (at least 100; fractions are rounded up): how long a crashed holder can block others. Renewed every ttl/3 while held
   * (ZooKeeper: a lock is trusted at most 0.9 x the session timeout past the last renewal the
   * server answered, and renewed every third of that).
   */
  ttl?: number;
  /** Ms to wait for a busy lock: `0` tries once, `Infinity` waits forever. Ignored by `tryAcquire`. */
  waitTimeout?: number;
  /** Renew the lease while held (default `true`). When `false` the lock is lost when the ttl passes. */
  autoRenew?: boolean;
  /**
   * Minimum ms, counted from acquisition, that the lock stays taken: a release before then leaves
   * the lock in place until that time (ShedLock's `lockAtLeastFor`; for jobs on several replicas).
   */
  lockAtLeastFor?: number;
  /**
   * Stops waiting at once when it aborts: the call rejects with `LockAbortedError` (its `cause`
   * is the signal's reason) and leaves nothing in the store (no queue entry, node or pinned
   * connection). It only governs the wait; a granted lock has its own `lock.signal`.
   */
  signal?: AbortSignal;
  /**
   * Hard cap on holding, in ms from the grant (default: the module's `defaults.maxHold`, else
   * none): renewal stops and the lock is given up (released in the store, its `signal`
   * aborted with `LockLostError`, a `lost` event emitted) however long the holder runs, so a
   * stuck handler cannot keep a key forever through the watchdog.
   */
  maxHold?: number;
}

/** Options of the `@Locked` decorator; `A` is the decorated method's argument list. */
export interface LockedOptions<A extends unknown[] = unknown[]> extends Omit<
  LockOptions,
  'signal'
> {
  /**
   * What to do when the lock is busy after `waitTimeout`: `'throw'` (default) rejects with
   * `LockNotAcquiredError`; `'skip'` resolves `undefined` without running the method.
   * With `'skip'`, `waitTimeout` defaults to `0`.
   */
  onBusy?: 'throw' | 'skip';
  /**
   * The wait's `AbortSignal`, taken from the call's arguments (e.g. a signal your controller
   * receives, or one made from the request's close event): when it aborts, the wait stops and
   * the call rejects with `LockAbortedError` without running the method.
   */
  signal?: (...args: A) => AbortSignal | undefined;
}

/** A held lock. `await using lock = await locks.acquire('k')` releases it at scope end. */
export interface Lock extends AsyncDisposable {
  /** The key as given (after templating), without the module's prefix; keys joined by `,` for a multi-key lock. */
  readonly key: string;
  /** Every key of this lock in canonical (acquisition) order; one element for a single-key lock. */
  readonly keys: readonly string[];
  /** Backend name. */
  readonly backend: string;
  /** Owner token of this acquisition (>= 128 random bits); shared by re-entries of the same lock. */
  readonly token: string;
  /**
   * Fencing token: strictly increasing per key across all grants; `null` only on a backend
   * documented as unable. For a multi-key lock, the fence of the first key (see `fences`).
   */
  readonly fence: number | null;
  /** Fence of each key, in the order of `keys`. */
  readonly fences: readonly (number | null)[];
  /** Aborted with a `LockLostError` when the lock is lost, and when this handle is released. */
  readonly signal: AbortSignal;
  /** `false` once lost, released, or past its lease (monotonic clock). */
  isHeld(): boolean;
  /** Renew the lease now (to `ttl`, default the lock's ttl); `LockLostError` if no longer ours. */
  extend(ttl?: number): Promise<void>;
  /** Release; idempotent; never deletes another holder's lock. Re-entries release only their count. */
  release(): Promise<void>;
}

/** What `LockService.inspect` tells about a key. */
export interface LockInfo {
  /** Whether someone (any process) holds the key now. */
  readonly held: boolean;
  /**
   * Fence of the current holder; when free, the last fence handed out for the key (the next
   * grant's is higher); `null` where the store cannot tell.
   */
  readonly fence: number | null;
  /** Lease left, ms, on stores that keep an expiry (absent for session locks). */
  readonly remainingMs?: number;
  /** Callers queued for the key, on stores that keep a queue. */
  readonly waiting?: number;
  /** How many hold it now (1 for a held lock, 0 when free). */
  readonly holders?: number;
  /** Whether this process (this module) holds it. */
  readonly mine: boolean;
}

/** Names of the events emitted by `LockService.on`. */
export type LockEventName = 'acquired' | 'released' | 'contended' | 'renewed' | 'lost' | 'error';

/** Payload of every lock event. */
export interface LockEvent {
  /** Which event. */
  readonly type: LockEventName;
  /** Key without prefix. */
  readonly key: string;
  /** Backend name. */
  readonly backend: string;
  /** Owner token, when the event concerns an acquisition attempt or a held lock. */
  readonly token?: string;
  /** Fence of the grant, when there is one. */
  readonly fence?: number | null;
  /** Ms spent waiting (`acquired`, `contended`). */
  readonly waitedMs?: number;
  /** Ms the lock was held (`released`, `lost`). */
  readonly heldMs?: number;
  /** Why (`lost`) or what failed (`error`). */
  readonly reason?: string;
  /** The underlying error (`error`, `lost`). */
  readonly error?: unknown;
}

/** Listener passed to `LockService.on`. */
export type LockEventListener = (event: LockEvent) => void;

/** One backend's answer to a health check (`LockService.health`). */
export interface LockBackendHealth {
  /** `up` when the store answered the ping within the timeout. */
  readonly status: 'up' | 'down';
  /** Time the ping took (or until it was given up), ms. */
  readonly latencyMs: number;
  /** Why it is down: the store's error, the timeout, or shutdown. */
  readonly error?: string;
}

/** Options of `LockService.health`. */
export interface LockHealthOptions {
  /** Longest wait for each backend's ping, ms (default 1 000). */
  timeout?: number;
  /** Backends to check (default: every configured backend). */
  backends?: readonly string[];
}

/** Counters and sums per backend, named after the conventional lock metrics. */
export interface LockMetrics {
  /** Acquisition attempts (each `acquire`/`tryAcquire`/`withLock` key, re-entries excluded). */
  lock_acquire_attempts_total: number;
  /** Successful acquisitions. */
  lock_acquired_total: number;
  /** Acquisitions that gave up busy. */
  lock_not_acquired_total: number;
  /** Locks lost while held. */
  lock_lost_total: number;
  /** Re-entries served without a backend call. */
  lock_reentered_total: number;
  /** Locks held right now. */
  lock_held: number;
  /** Sum and count of wait times in seconds (successful and failed acquisitions). */
  lock_wait_seconds: {
    /** Total of the waits, in seconds. */
    sum: number;
    /** Number of waits. */
    count: number;
  };
  /** Sum and count of hold times in seconds. */
  lock_hold_seconds: {
    /** Total of the holds, in seconds. */
    sum: number;
    /** Number of holds. */
    count: number;
  };
}
