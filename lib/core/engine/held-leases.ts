import type { Lease } from './lease';

/**
 * The leases this process holds, and how many of them running `withLock`/`@Locked` work holds
 * (work that graceful shutdown can wait for). A lease is added when granted and removed the
 * moment it is released or lost.
 */
export class HeldLeases {
  private readonly leases = new Map<string, Lease>();
  /** Resolvers waiting for the moment no running scope holds a lease. */
  private idleWaiters: Array<() => void> = [];

  /** The identity of a lease among those held: backend, full key and owner token. */
  static slot(backend: string, fullKey: string, token: string): string {
    return `${backend}\u0000${fullKey}\u0000${token}`;
  }

  /** Records a granted lease. */
  add(lease: Lease): void {
    this.leases.set(lease.slot, lease);
  }

  /** Forgets a lease that ended (released or lost). */
  delete(lease: Lease): void {
    this.leases.delete(lease.slot);
    this.checkIdle();
  }

  /** The held lease of (backend, full key, token), if any. */
  find(backend: string, fullKey: string, token: string): Lease | undefined {
    return this.leases.get(HeldLeases.slot(backend, fullKey, token));
  }

  /** Held leases of (backend, full key), whatever their token. */
  ofKey(backend: string, fullKey: string): Lease[] {
    return this.all().filter((l) => l.info.backendName === backend && l.info.fullKey === fullKey);
  }

  /** Every held lease. */
  all(): Lease[] {
    return [...this.leases.values()];
  }

  /** Held leases no running scope holds (a bare `acquire()` whose work is not ours to wait for). */
  outsideScopes(): Lease[] {
    return this.all().filter((lease) => lease.scopes === 0);
  }

  /** Leases held by running `withLock`/`@Locked` work. */
  inFlight(): number {
    let n = 0;
    for (const lease of this.leases.values()) if (lease.scopes > 0) n++;
    return n;
  }

  /** Runs `fn` counting it as a scope of `leases`, until it settles (sync or async). */
  runScoped<T>(leases: readonly Lease[], fn: () => T): T {
    for (const lease of leases) lease.scopes++;
    let result: T;
    try {
      result = fn();
    } catch (err) {
      this.leave(leases);
      throw err;
    }
    if (typeof (result as { then?: unknown } | null)?.then === 'function') {
      return Promise.resolve(result).finally(() => this.leave(leases)) as T;
    }
    this.leave(leases);
    return result;
  }

  /** Resolves once no running scope holds a lease (at once if none does). */
  whenIdle(): Promise<void> {
    if (this.inFlight() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private leave(leases: readonly Lease[]): void {
    for (const lease of leases) lease.scopes--;
    this.checkIdle();
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0 || this.inFlight() > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
