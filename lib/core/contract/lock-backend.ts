/**
 * The plug-in seam: the one interface a backend implements. Everything generic (validation,
 * reentrancy, watchdog renewal, deadlines, multi-key ordering, waiting policy, events) lives in
 * the engine; a backend only speaks to its store. This file imports nothing, so a backend that
 * depends on it depends on nothing of the engine. Keys reaching a backend already carry the
 * module's `keyPrefix`; tokens are unique per acquisition.
 */
export interface LockBackend {
  /** What this backend can do; the engine reads it and adapts (see each field). */
  readonly capabilities: LockBackendCapabilities;

  /** One attempt: take the lock for `request.token` with a lease of `request.ttlMs`, or `null` if busy. */
  tryAcquire(request: GrantRequest): Promise<LockGrant | null>;

  /**
   * Waits in the store's own queue (memory FIFO, Redis sorted set, ZooKeeper sequential nodes,
   * the database's lock wait) until granted, `request.waitMs` passes (`null`) or
   * `request.signal` aborts (`null`). Required when `capabilities.waiting` is `'queue'` or
   * `'queue-first'` (the engine refuses a backend that declares one without it); never called
   * for `'poll'`.
   */
  acquire?(request: QueuedRequest): Promise<LockGrant | null>;

  /** Renew the lease to `ttlMs` if `token` still owns `key`; `false` = no longer ours. */
  extend(key: string, token: string, ttlMs: number): Promise<boolean>;

  /**
   * Renews many leases in one round trip (per node, where the store has several): the engine's
   * renewal tick hands over every lease on this backend that is due. One result per request, in
   * order: `true` renewed to its `ttlMs`, `false` that lease is no longer ours (lost), an `Error`
   * that lease's renewal failed without an answer (retried, like a rejected `extend`). Rejects
   * when the whole batch failed. Each lease is renewed only if its own token still holds it.
   * Optional: without it the engine calls `extend` once per lease.
   */
  extendMany?(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]>;

  /**
   * Release if `token` owns `key`; `false` = it was not ours (expired or taken). Never frees
   * another owner's lock. `grant` says how the lock was asked for (its mode and permits), where
   * the caller knows (the engine always does); a backend may use it to pick its cheapest way.
   */
  release(key: string, token: string, grant?: GrantShape): Promise<boolean>;

  /** Whether anyone holds `key` right now. */
  isLocked(key: string): Promise<boolean>;

  /**
   * What the store knows about `key` now (admin and diagnostics: `LockService.inspect`).
   * Optional: the engine refuses `inspect` on a backend without it (`LockConfigError`).
   */
  inspect?(key: string): Promise<StoreLockInfo>;

  /**
   * Frees `key` whoever holds it (operators only: `LockService.forceRelease`); `true` when a
   * holder was removed. Fences keep rising, so a stale holder's fenced writes are refused, and its
   * next renewal finds the lock gone (its signal aborts). Optional, like `inspect`.
   */
  forceRelease?(key: string): Promise<boolean>;

  /**
   * Session-level loss (ZooKeeper session expiry, dropped DB connection): the backend calls
   * `listener` for each lost (key, token). Optional; lease backends rely on the watchdog.
   */
  onLost?(listener: LockLossListener): void;

  /**
   * How long a lease of `ttlMs` can be trusted from the moment its request was sent (never
   * more than `ttlMs`). The engine sets each lease's deadline from it and renews every third of
   * it. Redlock subtracts its clock-drift allowance; ZooKeeper caps it below the session timeout
   * (the server expires a session no sooner than that after it last heard from the client).
   * Absent: the ttl itself.
   */
  leaseValidity?(ttlMs: number): number;

  /**
   * One cheap round trip proving the store answers (health checks); rejects when it does not.
   * The engine bounds it with a timeout, so a store that never answers is reported, not waited on.
   */
  ping(): Promise<void>;

  /** Close resources this backend created; must not close clients the user passed in. */
  close(): Promise<void>;
}

/** The longest owner token a backend must store (a labelled one; plain tokens are 32). */
export const MAX_TOKEN_LENGTH = 1024;

/** What a store can tell about one key (`LockBackend.inspect`). */
export interface StoreLockInfo {
  /** Whether someone holds the key now. */
  readonly held: boolean;
  /**
   * Fence of the current holder; when free, the last fence handed out for the key (the next
   * grant's is higher); `null` when the store cannot tell.
   */
  readonly fence: number | null;
  /** Lease left, ms, where the store keeps an expiry (absent for session locks). */
  readonly remainingMs?: number;
  /** Callers queued for the key, where the store keeps a queue. */
  readonly waiting?: number;
  /** How many hold it now (1 for a held mutex, 0 when free; every holder of a shared or counted lock). */
  readonly holders?: number;
  /**
   * Mode of the current holders (`'shared'` when readers hold it); absent when free or where
   * the store cannot tell.
   */
  readonly mode?: LockMode;
  /** `permits` the current holders (and waiters) agreed on; absent when free or unknown. */
  readonly permits?: number;
  /** Slots held now (`Lock.permit` of each holder), ascending; absent when free or unknown. */
  readonly slots?: readonly number[];
  /**
   * The owner token of the key's exclusive holder (a mutex), where the store keeps it; absent
   * when free, shared or counted. Internal: the engine never shows it to users (a token is the
   * right to release), only the label after its first `.` (see `GrantRequest.token`).
   */
  readonly owner?: string;
}

/**
 * How a grant shares its key: `'exclusive'` excludes every other holder (or, with `permits`
 * above 1, every holder past the permits); `'shared'` admits any number of other `'shared'`
 * holders and no `'exclusive'` one.
 */
export type LockMode = 'exclusive' | 'shared';

/** How a grant shares its key: its mode and permits, as the request asked. */
export type GrantShape = Pick<GrantRequest, 'mode' | 'permits'>;

/** One grant asked of a backend. */
export interface GrantRequest {
  /** The key, prefix included. */
  readonly key: string;
  /**
   * Owner token of this acquisition: 32 hex digits, then optionally `.` and a label of
   * base64url characters (at most {@link MAX_TOKEN_LENGTH} in all). A backend stores and
   * compares it whole.
   */
  readonly token: string;
  /** Lease asked for, in ms. */
  readonly ttlMs: number;
  /**
   * `'shared'` or `'exclusive'`. The engine sends it on every request (renewals included);
   * absent means `'exclusive'` (direct callers, tools). Only `'exclusive'` reaches a backend
   * without `capabilities.shared`.
   */
  readonly mode?: LockMode;
  /**
   * Holders the key admits at once (1: a mutex). The engine sends it on every request; absent
   * means 1. Only 1 reaches a backend without `capabilities.permits`.
   */
  readonly permits?: number;
}

/** A grant the caller is willing to wait for (`LockBackend.acquire`). */
export interface QueuedRequest extends GrantRequest {
  /** Longest wait in ms (`Infinity`: until granted or aborted). */
  readonly waitMs: number;
  /**
   * Aborts the wait (the caller's signal, or shutdown): the backend stops waiting at once, leaves
   * its queue (no entry, node or pinned connection left) and resolves `null`.
   */
  readonly signal: AbortSignal;
  /** Called (at most once matters) when the lock was found busy and the caller starts waiting. */
  readonly onQueued?: () => void;
}

/** What a backend returns for a successful grant. */
export interface LockGrant {
  /**
   * Fencing token, strictly increasing per key across all grants. A number when
   * `capabilities.fencing` is true (the engine refuses a grant without one); `null` otherwise.
   */
  readonly fence: number | null;
  /**
   * Monotonic time (`performance.now()`) at which the store granted the lock, for queued
   * grants that happen some time after the request was sent. Defaults to the send time.
   */
  readonly grantedAt?: number;
  /**
   * The store granted a shorter lease than the ttl asked for (a lock handed over to a queued
   * waiter): the engine trusts only this much from `grantedAt` and renews to the ttl after a
   * third of it.
   */
  readonly validityMs?: number;
  /**
   * Slot this grant holds, `0..permits-1`, unique among the key's current holders (absent: 0).
   * The engine refuses a grant whose slot is out of range.
   */
  readonly permit?: number;
}

/**
 * Called by a backend for a lock it lost at the session or connection level, with the key
 * (prefix included), the owner token and a human-readable reason.
 */
export type LockLossListener = (key: string, token: string, reason: string) => void;

/** Static facts about a backend, read by the engine and asserted by the conformance battery. */
export interface LockBackendCapabilities {
  /**
   * `true` when the store expires the lock by itself after the ttl (Redis, table, memory);
   * `false` when it lives as long as a session or connection (ZooKeeper, for-update,
   * advisory). The engine renews both alike; `lockAtLeastFor` differs: a lease is left to
   * expire, a session lock is released later by the engine.
   */
  readonly leaseBased: boolean;
  /** `true` when every grant carries a fencing token (a number); `false`: always `null`. */
  readonly fencing: boolean;
  /**
   * How a caller that may wait gets a busy lock:
   * - `'poll'`: the engine retries `tryAcquire` with jittered exponential backoff;
   * - `'queue'`: the engine tries once, then waits in `acquire`;
   * - `'queue-first'`: the engine calls `acquire` straight away, its first step taking a free
   *   lock anyway (a separate try would add a round trip to every contended acquisition).
   */
  readonly waiting: 'poll' | 'queue' | 'queue-first';
  /**
   * `true` when the backend grants `mode: 'shared'` (readers together, a writer alone, writer
   * preference). Absent or `false`: the engine refuses a shared request with `LockConfigError`
   * before any I/O.
   */
  readonly shared?: boolean;
  /**
   * `true` when the backend grants `permits` above 1 (counted locks, each grant with its slot).
   * Absent or `false`: the engine refuses such a request with `LockConfigError` before any I/O.
   */
  readonly permits?: boolean;
  /**
   * The most `permits` the backend grants one key, where it is below the engine's own limit
   * (1024): the engine refuses a request for more with `LockConfigError` (field `permits`)
   * before any I/O. Absent: the engine's limit.
   */
  readonly maxPermits?: number;
}
