import { monotonicNow } from '../../core/shared/clock';
import { unrefTimer } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';

interface Waiter {
  readonly token: string;
  readonly ttlMs: number;
  readonly resolve: (grant: LockGrant | null) => void;
  readonly cleanup: () => void;
}

/** One key: its owner (if any) and its queue, flat in one object. */
interface Entry {
  /** Owner token; `undefined` when free. */
  token: string | undefined;
  expiresAt: number;
  fence: number;
  /** FIFO of waiters; created by the first one. */
  waiters: Waiter[] | undefined;
  /**
   * Hands the lock on when the owner's lease runs out, armed only while someone waits for it:
   * an owner nobody waits for expires by the clock alone (every read checks `expiresAt`), so an
   * uncontended lock costs no timer (a timer per grant was a fifth of a memory cycle and ~230
   * bytes per held lock).
   */
  timer: NodeJS.Timeout | undefined;
}

/** How often keys whose lease ran out with nobody waiting are forgotten. */
const SWEEP_MS = 2_000;

/**
 * In-process backend: a map of keys with ttl, FIFO hand-off to waiters, and one global fence
 * counter (strictly increasing per key because it increases across all keys, and it needs no
 * per-key state that would grow forever). For tests and single-instance apps only: it does
 * not coordinate processes.
 */
export class MemoryLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'queue',
  };

  private readonly entries = new Map<string, Entry>();
  private fence = 0;
  private closed = false;
  /** Forgets expired keys nobody released (left to expire, or abandoned); one per backend. */
  private sweeper?: NodeJS.Timeout;

  async tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    const entry = this.entries.get(key);
    if (entry && (this.isOwned(entry) || hasWaiters(entry))) return null;
    return this.grant(key, entry ?? this.newEntry(key), token, ttlMs);
  }

  acquire({ key, token, ttlMs, waitMs, signal }: QueuedRequest): Promise<LockGrant | null> {
    const entry = this.entries.get(key) ?? this.newEntry(key);
    if (!this.isOwned(entry) && !hasWaiters(entry)) {
      return Promise.resolve(this.grant(key, entry, token, ttlMs));
    }
    if (signal.aborted || waitMs <= 0) {
      this.dropIfIdle(key, entry);
      return Promise.resolve(null);
    }
    return new Promise((resolve) => {
      const giveUp = (): void => {
        const waiters = entry.waiters!;
        const i = waiters.indexOf(waiter);
        if (i >= 0) waiters.splice(i, 1);
        waiter.cleanup();
        if (waiters.length === 0 && entry.timer) {
          clearTimeout(entry.timer);
          entry.timer = undefined;
        }
        this.dropIfIdle(key, entry);
        resolve(null);
      };
      const timer = Number.isFinite(waitMs) ? unrefTimer(giveUp, waitMs) : undefined;
      signal.addEventListener('abort', giveUp, { once: true });
      const waiter: Waiter = {
        token,
        ttlMs,
        resolve,
        cleanup: () => {
          if (timer) clearTimeout(timer);
          signal.removeEventListener('abort', giveUp);
        },
      };
      (entry.waiters ??= []).push(waiter);
      this.armExpiry(key, entry);
    });
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const entry = this.entries.get(key);
    if (!entry || entry.token !== token || !this.isOwned(entry)) return false;
    // An armed expiry timer sees the later expiresAt when it fires and waits on.
    entry.expiresAt = monotonicNow() + ttlMs;
    return true;
  }

  async extendMany(requests: readonly GrantRequest[]): Promise<readonly boolean[]> {
    return Promise.all(requests.map((r) => this.extend(r.key, r.token, r.ttlMs)));
  }

  async release(key: string, token: string): Promise<boolean> {
    const entry = this.entries.get(key);
    if (!entry || entry.token !== token) return false;
    const wasOurs = this.isOwned(entry);
    this.handOff(key, entry);
    return wasOurs;
  }

  async isLocked(key: string): Promise<boolean> {
    const entry = this.entries.get(key);
    return entry !== undefined && this.isOwned(entry);
  }

  async inspect(key: string): Promise<StoreLockInfo> {
    const entry = this.entries.get(key);
    const owned = entry !== undefined && this.isOwned(entry);
    return {
      held: owned,
      // When free: the counter is shared by all keys, at or above this key's last fence.
      fence: owned ? entry.fence : this.fence,
      remainingMs: owned ? Math.max(0, entry.expiresAt - monotonicNow()) : undefined,
      waiting: entry?.waiters?.length ?? 0,
      holders: owned ? 1 : 0,
    };
  }

  async forceRelease(key: string): Promise<boolean> {
    const entry = this.entries.get(key);
    if (!entry || !this.isOwned(entry)) return false;
    this.handOff(key, entry);
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

  private newEntry(key: string): Entry {
    const entry: Entry = {
      token: undefined,
      expiresAt: 0,
      fence: 0,
      waiters: undefined,
      timer: undefined,
    };
    this.entries.set(key, entry);
    if (!this.sweeper && !this.closed) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweeper.unref();
    }
    return entry;
  }

  private isOwned(entry: Entry): boolean {
    return entry.token !== undefined && monotonicNow() < entry.expiresAt;
  }

  private grant(key: string, entry: Entry, token: string, ttlMs: number): LockGrant {
    const grantedAt = monotonicNow();
    const fence = ++this.fence;
    entry.token = token;
    entry.expiresAt = grantedAt + ttlMs;
    entry.fence = fence;
    if (hasWaiters(entry)) this.armExpiry(key, entry);
    return { fence, grantedAt };
  }

  /** Arms the hand-on at the owner's expiry, if not armed (someone waits now). */
  private armExpiry(key: string, entry: Entry): void {
    if (entry.timer || entry.token === undefined) return;
    entry.timer = unrefTimer(() => this.expire(key, entry), entry.expiresAt - monotonicNow());
  }

  /** Lease ran out (or was extended meanwhile): pass the lock to the next waiter, as a release would. */
  private expire(key: string, entry: Entry): void {
    entry.timer = undefined;
    if (entry.token === undefined || this.entries.get(key) !== entry) return;
    if (monotonicNow() < entry.expiresAt) {
      this.armExpiry(key, entry);
      return;
    }
    this.handOff(key, entry);
  }

  /** Frees the key and grants it straight to the oldest waiter (FIFO, no barging). */
  private handOff(key: string, entry: Entry): void {
    if (entry.timer) {
      clearTimeout(entry.timer);
      entry.timer = undefined;
    }
    entry.token = undefined;
    const next = entry.waiters?.shift();
    if (next) {
      next.cleanup();
      next.resolve(this.grant(key, entry, next.token, next.ttlMs));
    } else {
      this.dropIfIdle(key, entry);
    }
  }

  private dropIfIdle(key: string, entry: Entry): void {
    if (entry.token === undefined && !hasWaiters(entry) && this.entries.get(key) === entry)
      this.entries.delete(key);
  }

  /** Forgets keys whose lease ran out with nobody waiting (never released, or left to expire). */
  private sweep(): void {
    const now = monotonicNow();
    for (const [key, entry] of this.entries) {
      if (!hasWaiters(entry) && (entry.token === undefined || now >= entry.expiresAt)) {
        this.entries.delete(key);
      }
    }
  }
}

function hasWaiters(entry: Entry): boolean {
  return entry.waiters !== undefined && entry.waiters.length > 0;
}
