import type { Lease } from './lease';

/**
 * The leases this process holds, and how many of them running `withLock`/`@Locked` work holds
 * (work that graceful shutdown can wait for). A lease is added when granted and removed the
 * moment it is released or lost.
 */
export class HeldLeases {
  /**
   * By owner token: one lease, or the leases of one multi-key acquisition (they share its
   * token). Tokens are unique per acquisition, so the token alone finds a lease; keying by a
   * string built of backend, key and token cost a concatenation and its hashing per lock (and
   * ~100 bytes per held lock).
   */
  private readonly leases = new Map<string, Lease | Lease[]>();
  /** Resolvers waiting for the moment no running scope holds a lease. */
  private idleWaiters: Array<() => void> = [];

  /** Records a granted lease. */
  add(lease: Lease): void {
    const { token } = lease.info;
    const there = this.leases.get(token);
    if (there === undefined) this.leases.set(token, lease);
    else if (Array.isArray(there)) there.push(lease);
    else this.leases.set(token, [there, lease]);
  }

  /** Forgets a lease that ended (released or lost). */
  delete(lease: Lease): void {
    const { token } = lease.info;
    const there = this.leases.get(token);
    if (there === lease) {
      this.leases.delete(token);
    } else if (Array.isArray(there)) {
      const i = there.indexOf(lease);
      if (i >= 0) {
        there.splice(i, 1);
        if (there.length === 1) this.leases.set(token, there[0]);
      }
    }
    if (this.idleWaiters.length > 0) this.checkIdle();
  }

  /** The held lease of (backend, full key, token), if any. */
  find(backend: string, fullKey: string, token: string): Lease | undefined {
    const there = this.leases.get(token);
    const matches = (l: Lease): boolean =>
      l.info.fullKey === fullKey && l.info.backendName === backend;
    if (there === undefined) return undefined;
    if (!Array.isArray(there)) return matches(there) ? there : undefined;
    return there.find(matches);
  }

  /** Held leases of (backend, full key), whatever their token. */
  ofKey(backend: string, fullKey: string): Lease[] {
    return this.all().filter((l) => l.info.backendName === backend && l.info.fullKey === fullKey);
  }

  /** Every held lease. */
  all(): Lease[] {
    const out: Lease[] = [];
    for (const there of this.leases.values()) {
      if (Array.isArray(there)) out.push(...there);
      else out.push(there);
    }
    return out;
  }

  /** Held leases no running scope holds (a bare `acquire()` whose work is not ours to wait for). */
  outsideScopes(): Lease[] {
    return this.all().filter((lease) => lease.scopes === 0);
  }

  /** Leases held by running `withLock`/`@Locked` work. */
  inFlight(): number {
    let n = 0;
    for (const there of this.leases.values()) {
      if (!Array.isArray(there)) {
        if (there.scopes > 0) n++;
      } else for (const lease of there) if (lease.scopes > 0) n++;
    }
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
