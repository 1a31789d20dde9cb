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

interface Entry {
  owner?: { token: string; expiresAt: number; fence: number; timer: NodeJS.Timeout };
  readonly waiters: Waiter[];
}

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

  async tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    const entry = this.entries.get(key);
    if (entry && (this.isOwned(entry) || entry.waiters.length > 0)) return null;
    return this.grant(key, entry ?? this.newEntry(key), token, ttlMs);
  }

  acquire({ key, token, ttlMs, waitMs, signal }: QueuedRequest): Promise<LockGrant | null> {
    const entry = this.entries.get(key) ?? this.newEntry(key);
    if (!this.isOwned(entry) && entry.waiters.length === 0) {
      return Promise.resolve(this.grant(key, entry, token, ttlMs));
    }
    if (signal.aborted || waitMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const giveUp = (): void => {
        const i = entry.waiters.indexOf(waiter);
        if (i >= 0) entry.waiters.splice(i, 1);
        waiter.cleanup();
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
      entry.waiters.push(waiter);
    });
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const entry = this.entries.get(key);
    if (!entry?.owner || entry.owner.token !== token || !this.isOwned(entry)) return false;
    clearTimeout(entry.owner.timer);
    entry.owner.expiresAt = monotonicNow() + ttlMs;
    entry.owner.timer = unrefTimer(() => this.expire(key, token), ttlMs);
    return true;
  }

  async extendMany(requests: readonly GrantRequest[]): Promise<readonly boolean[]> {
    return Promise.all(requests.map((r) => this.extend(r.key, r.token, r.ttlMs)));
  }

  async release(key: string, token: string): Promise<boolean> {
    const entry = this.entries.get(key);
    if (!entry?.owner || entry.owner.token !== token) return false;
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
      fence: owned ? entry.owner!.fence : this.fence,
      remainingMs: owned ? Math.max(0, entry.owner!.expiresAt - monotonicNow()) : undefined,
      waiting: entry?.waiters.length ?? 0,
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
    for (const entry of this.entries.values()) {
      if (entry.owner) clearTimeout(entry.owner.timer);
      for (const waiter of entry.waiters.splice(0)) {
        waiter.cleanup();
        waiter.resolve(null);
      }
    }
    this.entries.clear();
  }

  private newEntry(key: string): Entry {
    const entry: Entry = { waiters: [] };
    this.entries.set(key, entry);
    return entry;
  }

  private isOwned(entry: Entry): boolean {
    return entry.owner !== undefined && monotonicNow() < entry.owner.expiresAt;
  }

  private grant(key: string, entry: Entry, token: string, ttlMs: number): LockGrant {
    if (entry.owner) clearTimeout(entry.owner.timer);
    const grantedAt = monotonicNow();
    const fence = ++this.fence;
    entry.owner = {
      token,
      expiresAt: grantedAt + ttlMs,
      fence,
      timer: unrefTimer(() => this.expire(key, token), ttlMs),
    };
    return { fence, grantedAt };
  }

  /** Lease ran out: pass the lock to the next waiter, as a release would. */
  private expire(key: string, token: string): void {
    const entry = this.entries.get(key);
    if (!entry?.owner || entry.owner.token !== token) return;
    if (monotonicNow() < entry.owner.expiresAt) {
      entry.owner.timer = unrefTimer(
        () => this.expire(key, token),
        entry.owner.expiresAt - monotonicNow(),
      );
      return;
    }
    this.handOff(key, entry);
  }

  /** Frees the key and grants it straight to the oldest waiter (FIFO, no barging). */
  private handOff(key: string, entry: Entry): void {
    if (entry.owner) clearTimeout(entry.owner.timer);
    entry.owner = undefined;
    const next = entry.waiters.shift();
    if (next) {
      next.cleanup();
      next.resolve(this.grant(key, entry, next.token, next.ttlMs));
    } else {
      this.dropIfIdle(key, entry);
    }
  }

  private dropIfIdle(key: string, entry: Entry): void {
    if (!entry.owner && entry.waiters.length === 0 && this.entries.get(key) === entry)
      this.entries.delete(key);
  }
}
