import { AsyncLocalStorage } from 'node:async_hooks';
import type { Lease } from './lease';
import type { LockHandle } from './lock-handle';

/**
 * One `withLock`/`@Locked` scope. `leases` holds every lease visible in the scope (the
 * parent's plus this one's) so a re-entry check is one map lookup.
 */
export interface LockFrame {
  readonly handle: LockHandle;
  readonly leases: ReadonlyMap<string, Lease>;
  readonly parent?: LockFrame;
}

/**
 * Reentrancy scopes. Only `withLock`/`@Locked` open a scope (`AsyncLocalStorage.run`): a bare
 * `acquire()` cannot, because `enterWith` would leak the lock into sibling calls started in
 * the same tick (8 parallel requests would all "re-enter" one lock).
 */
export class LockContext {
  private readonly storage = new AsyncLocalStorage<LockFrame>();

  /** Identity of a (backend, key) pair inside one manager. */
  static slot(backend: string, fullKey: string): string {
    return `${backend}\u0000${fullKey}`;
  }

  /** The lease for (backend, key) held by an enclosing scope, if any. */
  find(backend: string, fullKey: string): Lease | undefined {
    return this.storage.getStore()?.leases.get(LockContext.slot(backend, fullKey));
  }

  /** Runs `fn` in a new scope holding `handle`. */
  run<T>(handle: LockHandle, fn: () => T): T {
    const parent = this.storage.getStore();
    const leases = new Map(parent?.leases);
    for (const lease of handle.leases) {
      leases.set(LockContext.slot(lease.info.backendName, lease.info.fullKey), lease);
    }
    return this.storage.run({ handle, leases, parent }, fn);
  }

  /** Innermost handle of this async context that is not released yet. */
  current(): LockHandle | undefined {
    let frame = this.storage.getStore();
    while (frame && frame.handle.isReleased) frame = frame.parent;
    return frame?.handle;
  }
}
