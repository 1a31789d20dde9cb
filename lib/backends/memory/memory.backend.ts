import { monotonicNow } from '../../core/shared/clock';
import { unrefTimer } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockMode,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import {
  admits,
  type Entry,
  findHolder,
  freeSlot,
  hasWaiters,
  type Holder,
  isHeld,
  liveHolders,
  pruneExpired,
  removeHolder,
  type Waiter,
} from './memory-entry';

/** How often keys whose lease ran out with nobody waiting are forgotten. */
const SWEEP_MS = 2_000;

/**
 * In-process backend: a map of keys with ttl, FIFO hand-off to waiters, and one global fence
 * counter (strictly increasing per key because it increases across all keys, and it needs no
 * per-key state that would grow forever). For tests and single-instance apps only: it does
 * not coordinate processes.
 *
 * Shared and counted locks: a key admits a request when it has no waiter (FIFO, no barging)
 * and its live holders let it in: none for an `exclusive` mutex, only `shared` ones for a
 * `shared` request, fewer than `permits` for a counted one (which gets the lowest free slot).
 * A waiting `exclusive` request thus holds back every `shared` request behind it (writer
 * preference); a release, an expiry or a waiter leaving admits the queue's head, and whoever
 * follows it while they fit (readers behind a leaving writer enter together). Every holder and
 * waiter of a key must ask the same `permits` while the key is busy; a request that disagrees
 * is refused with `LockConfigError` (never over-admitted).
 */
export class MemoryLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'queue',
    shared: true,
    permits: true,
  };

  private readonly entries = new Map<string, Entry>();
  private fence = 0;
  private closed = false;
  /** Forgets expired keys nobody released (left to expire, or abandoned); one per backend. */
  private sweeper?: NodeJS.Timeout;

  async tryAcquire({
    key,
    token,
    ttlMs,
    mode = 'exclusive',
    permits = 1,
  }: GrantRequest): Promise<LockGrant | null> {
    const existing = this.entries.get(key);
    if (existing === undefined) return this.grant(this.newEntry(key, permits), token, ttlMs, mode);
    const entry = existing;
    this.settle(key, entry, monotonicNow());
    this.agree(key, entry, permits);
    if (hasWaiters(entry) || !admits(entry, mode)) {
      this.dropIfIdle(key, entry);
      return null;
    }
    return this.grant(entry, token, ttlMs, mode);
  }

  acquire({
    key,
    token,
    ttlMs,
    mode = 'exclusive',
    permits = 1,
    waitMs,
    signal,
  }: QueuedRequest): Promise<LockGrant | null> {
    let entry = this.entries.get(key);
    if (entry === undefined) entry = this.newEntry(key, permits);
    else {
      this.settle(key, entry, monotonicNow());
      try {
        this.agree(key, entry, permits);
      } catch (err) {
        this.dropIfIdle(key, entry);
        return Promise.reject(err);
      }
    }
    if (!hasWaiters(entry) && admits(entry, mode)) {
      return Promise.resolve(this.grant(entry, token, ttlMs, mode));
    }
    if (signal.aborted || waitMs <= 0) {
      this.dropIfIdle(key, entry);
      return Promise.resolve(null);
    }
    const queued = entry;
    return new Promise((resolve) => {
      const giveUp = (): void => {
        const waiters = queued.waiters!;
        const i = waiters.indexOf(waiter);
        if (i >= 0) waiters.splice(i, 1);
        waiter.cleanup();
        // A writer leaving the head of the queue lets the readers behind it in.
        this.settle(key, queued, monotonicNow());
        this.dropIfIdle(key, queued);
        resolve(null);
      };
      const timer = Number.isFinite(waitMs) ? unrefTimer(giveUp, waitMs) : undefined;
      signal.addEventListener('abort', giveUp, { once: true });
      const waiter: Waiter = {
        token,
        ttlMs,
        mode,
        resolve,
        cleanup: () => {
          if (timer) clearTimeout(timer);
          signal.removeEventListener('abort', giveUp);
        },
      };
      (queued.waiters ??= []).push(waiter);
      this.armExpiry(key, queued);
    });
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const entry = this.entries.get(key);
    const holder = entry && findHolder(entry, token);
    const now = monotonicNow();
    if (!holder || now >= holder.expiresAt) return false;
    // An armed expiry timer sees the later expiresAt when it fires and waits on.
    holder.expiresAt = now + ttlMs;
    return true;
  }

  async extendMany(requests: readonly GrantRequest[]): Promise<readonly boolean[]> {
    return Promise.all(requests.map((r) => this.extend(r.key, r.token, r.ttlMs)));
  }

  async release(key: string, token: string): Promise<boolean> {
    const entry = this.entries.get(key);
    const holder = entry && findHolder(entry, token);
    if (!holder) return false;
    const now = monotonicNow();
    removeHolder(entry!, holder);
    this.settle(key, entry!, now);
    this.dropIfIdle(key, entry!);
    return now < holder.expiresAt;
  }

  async isLocked(key: string): Promise<boolean> {
    const entry = this.entries.get(key);
    return entry !== undefined && isHeld(entry, monotonicNow());
  }

  async inspect(key: string): Promise<StoreLockInfo> {
    const entry = this.entries.get(key);
    const now = monotonicNow();
    const live = entry === undefined ? [] : liveHolders(entry, now);
    const waiting = entry?.waiters?.length ?? 0;
    if (live.length === 0) {
      // When free: the counter is shared by all keys, at or above this key's last fence.
      return { held: false, fence: this.fence, waiting, holders: 0 };
    }
    return {
      held: true,
      // The latest grant's: a fenced store must accept it, and it is above every other holder's.
      fence: Math.max(...live.map((h) => h.fence)),
      // The key stays held until the last lease runs out.
      remainingMs: Math.max(0, Math.max(...live.map((h) => h.expiresAt)) - now),
      waiting,
      holders: live.length,
      mode: live[0].mode,
      permits: entry!.permits,
      slots: live.map((h) => h.permit).sort((a, b) => a - b),
      ...(entry!.permits === 1 && live[0].mode === 'exclusive' ? { owner: live[0].token } : {}),
    };
  }

  async forceRelease(key: string): Promise<boolean> {
    const entry = this.entries.get(key);
    const now = monotonicNow();
    if (!entry || !isHeld(entry, now)) return false;
    entry.holders = undefined;
    this.settle(key, entry, now);
    this.dropIfIdle(key, entry);
    return true;
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error('closed');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    for (const entry of this.entries.values()) {
      if (entry.timer) clearTimeout(entry.timer);
      for (const waiter of entry.waiters?.splice(0) ?? []) {
        waiter.cleanup();
        waiter.resolve(null);
      }
    }
    this.entries.clear();
  }

  private newEntry(key: string, permits: number): Entry {
    const entry: Entry = { holders: undefined, permits, waiters: undefined, timer: undefined };
    this.entries.set(key, entry);
    if (!this.sweeper && !this.closed) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweeper.unref();
    }
    return entry;
  }

  /**
   * Every holder and waiter of a busy key asks the same `permits`: a request that disagrees is
   * refused (admitting it under either count would let more in than one of them allows). An
   * idle key takes the request's. Call after `settle` (expired holders gone).
   */
  private agree(key: string, entry: Entry, permits: number): void {
    if (entry.holders === undefined && !hasWaiters(entry)) {
      entry.permits = permits;
    } else if (entry.permits !== permits) {
      throw permitsDisagreement(key, entry.permits, permits);
    }
  }

  private grant(entry: Entry, token: string, ttlMs: number, mode: LockMode): Holder {
    const grantedAt = monotonicNow();
    const holder: Holder = {
      token,
      mode,
      fence: ++this.fence,
      permit: entry.holders === undefined || entry.permits === 1 ? 0 : freeSlot(entry),
      grantedAt,
      expiresAt: grantedAt + ttlMs,
    };
    const there = entry.holders;
    if (there === undefined) entry.holders = holder;
    else if (Array.isArray(there)) there.push(holder);
    else entry.holders = [there, holder];
    return holder;
  }

  /**
   * After any change to a key (release, expiry, force, a waiter leaving) and before admitting a
   * request: drops holders whose lease ran out by `now`, admits waiters from the head of the
   * queue while they fit, then re-arms the expiry hand-on for those still waiting. The caller
   * forgets the key if it ends idle (`dropIfIdle`), unless it is about to grant it.
   */
  private settle(key: string, entry: Entry, now: number): void {
    pruneExpired(entry, now);
    const waiters = entry.waiters;
    while (waiters !== undefined && waiters.length > 0 && admits(entry, waiters[0].mode)) {
      const next = waiters.shift()!;
      next.cleanup();
      next.resolve(this.grant(entry, next.token, next.ttlMs, next.mode));
    }
    if (entry.timer) {
      clearTimeout(entry.timer);
      entry.timer = undefined;
    }
    if (hasWaiters(entry)) this.armExpiry(key, entry);
  }

  /** Arms the hand-on at the earliest holder's expiry, if not armed (someone waits now). */
  private armExpiry(key: string, entry: Entry): void {
    if (entry.timer || entry.holders === undefined) return;
    const holders = entry.holders;
    let earliest = Array.isArray(holders) ? Infinity : holders.expiresAt;
    if (Array.isArray(holders)) for (const h of holders) earliest = Math.min(earliest, h.expiresAt);
    entry.timer = unrefTimer(() => this.expire(key, entry), earliest - monotonicNow());
  }

  /** A lease ran out (or was extended meanwhile): pass the key on, as a release would. */
  private expire(key: string, entry: Entry): void {
    entry.timer = undefined;
    if (this.entries.get(key) !== entry) return;
    this.settle(key, entry, monotonicNow());
    this.dropIfIdle(key, entry);
  }

  private dropIfIdle(key: string, entry: Entry): void {
    if (entry.holders === undefined && !hasWaiters(entry) && this.entries.get(key) === entry)
      this.entries.delete(key);
  }

  /** Forgets keys whose leases ran out with nobody waiting (never released, or left to expire). */
  private sweep(): void {
    const now = monotonicNow();
    for (const [key, entry] of this.entries) {
      if (!hasWaiters(entry) && !isHeld(entry, now)) {
        this.entries.delete(key);
      }
    }
  }
}
