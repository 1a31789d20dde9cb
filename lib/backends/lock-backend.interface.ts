/**
 * The one interface a backend implements. Everything generic (validation, reentrancy,
 * watchdog renewal, deadlines, multi-key ordering, events, waiting policy) lives in the core;
 * a backend only speaks to its store. Keys reaching a backend already carry the module's
 * `keyPrefix`. Tokens are unique per acquisition.
 */
export interface LockBackend {
  /** What this backend can do; the core adapts to it. */
  readonly capabilities: LockBackendCapabilities;

  /** One attempt: take the lock for `token` with a lease of `ttlMs`, or `null` if busy. */
  tryAcquire(key: string, token: string, ttlMs: number): Promise<LockGrant | null>;

  /**
   * Optional queued acquisition for stores with waiter queues (memory FIFO, Redis sorted set,
   * ZooKeeper sequential nodes). Resolves `null` when `waitMs` passes or `signal` aborts.
   * Calls `onQueued` (if given) when it finds the lock busy and starts waiting.
   * When absent, the core loops `tryAcquire` with jittered exponential backoff.
   */
  acquire?(
    key: string,
    token: string,
    ttlMs: number,
    waitMs: number,
    signal: AbortSignal,
    onQueued?: () => void,
  ): Promise<LockGrant | null>;

  /** Renew the lease to `ttlMs` if `token` still owns `key`; `false` = no longer ours. */
  extend(key: string, token: string, ttlMs: number): Promise<boolean>;

  /** Release if `token` owns `key`; `false` = it was not ours (expired or taken). Never frees another owner's lock. */
  release(key: string, token: string): Promise<boolean>;

  /** Whether anyone holds `key` right now. */
  isLocked(key: string): Promise<boolean>;

  /**
   * Session-level loss (ZooKeeper session expiry, dropped DB connection): the backend calls
   * `listener` for each lost (key, token). Optional; lease backends rely on the watchdog.
   */
  onLost?(listener: (key: string, token: string, reason: string) => void): void;

  /**
   * Session-bound stores: how long, at most, a lock can be trusted after a request the server
   * answered was sent, whatever the ttl (ZooKeeper: the server expires a session no sooner than
   * the session timeout after it last heard from the client). The core caps each lease's
   * validity at this and renews every third of it. Absent: the ttl alone decides.
   */
  validityCapMs?(): number;

  /**
   * One cheap round trip proving the store answers (health checks); rejects when it does not.
   * The core bounds it with a timeout, so a store that never answers is reported, not waited on.
   */
  ping(): Promise<void>;

  /** Close resources this backend created; must not close clients the user passed in. */
  close(): Promise<void>;
}

/** What a backend returns for a successful grant. */
export interface LockGrant {
  /** Fencing token, strictly increasing per key across all grants; `null` if the backend cannot. */
  readonly fence: number | null;
  /**
   * Monotonic time (`performance.now()`) at which the store granted the lock, for queued
   * grants that happen some time after the request was sent. Defaults to the send time.
   */
  readonly grantedAt?: number;
  /**
   * The store granted a shorter lease than the ttl asked for (a lock handed over to a queued
   * waiter): the core trusts only this much from `grantedAt` and renews to the ttl after a
   * third of it.
   */
  readonly validityMs?: number;
}

/** Static facts about a backend. */
export interface LockBackendCapabilities {
  /**
   * `true` when the store expires the lock by itself after the ttl (Redis, table, memory);
   * `false` when it lives as long as a session or connection (ZooKeeper, for-update, advisory).
   */
  readonly leaseBased: boolean;
  /** `true` when grants carry a fencing token. */
  readonly fencing: boolean;
  /**
   * Clock drift allowed between independent servers, as a fraction of the ttl (Redlock: 0.01).
   * The core shortens every lease it believes in by `driftFactor * ttl + 2 ms`. Default 0.
   */
  readonly driftFactor?: number;
  /**
   * `true`: when the caller may wait, the core calls `acquire` straight away instead of a
   * `tryAcquire` first (for queues whose first step takes a free lock anyway).
   */
  readonly queueAtOnce?: boolean;
}
