/**
 * How a lock shares its key: `'exclusive'` (the default) excludes every other holder;
 * `'shared'` admits any number of other `'shared'` holders and no `'exclusive'` one.
 */
export type LockMode = 'exclusive' | 'shared';

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
  /**
   * `'exclusive'` (default) or `'shared'`: any number of `shared` holders of a key at once, an
   * `exclusive` holder excludes everything else, and once an `exclusive` request waits, new
   * `shared` requests wait behind it (writer preference: readers cannot starve a writer).
   * Inside a scope holding the key `exclusive`, a `shared` request re-enters; inside one holding
   * it `shared`, an `exclusive` request is refused (`LockConfigError`: no upgrade). Refused
   * with `LockConfigError` on a backend without the capability (see the README's backend table).
   */
  mode?: LockMode;
  /**
   * Holders of the key admitted at once (an integer, 1 to 1024; default 1, a mutex). Each grant holds a slot, `lock.permit`, unique among the key's current holders.
   * Every holder and waiter of a key must ask the same `permits` (else `LockConfigError`). Not
   * with `mode: 'shared'` (a shared lock already admits any number of readers).
   */
  permits?: number;
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
  /**
   * Slot held, `0..permits-1`, unique among the key's current holders (0 for a mutex or a
   * shared lock). For a multi-key lock, the slot of the first key. A re-entry holds the slot
   * of the lock it re-enters.
   */
  readonly permit: number;
  /**
   * What is held: `'shared'` when any key is held shared, else `'exclusive'` (a `shared`
   * request re-entering an `exclusive` hold gets `'exclusive'`: it holds more than it asked).
   */
  readonly mode: LockMode;
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
  /** How many hold it now (1 for a held mutex, every holder of a shared or counted lock, 0 when free). */
  readonly holders?: number;
  /** Mode of the current holders, on stores that can tell; absent when free. */
  readonly mode?: LockMode;
  /** `permits` of the current holders, on stores that can tell; absent when free. */
  readonly permits?: number;
  /** Slots held now (each holder's `lock.permit`), ascending, on stores that can tell; absent when free. */
  readonly slots?: readonly number[];
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
