import type { Lease } from './lease';

/**
 * The leases this process holds, and how many of them running `withLock`/`@Locked` work holds
 * (work that graceful shutdown can wait for). A lease is added when granted and removed the
 * moment it is released or lost.
 *
 * They are kept in a list linked through the leases themselves: adding and removing one, on
 * every acquisition and release, allocates nothing and hashes nothing. Only the leases of a
 * backend that reports losses by owner token (`onLost`: session stores) are also indexed by
 * token, for those reports.
 */
export class HeldLeases {
  /** The most recently added lease; the list goes on through `heldNext`. */
  private newest?: Lease;
  /**
   * By owner token, the leases of backends that report losses (`onLost`): one lease, or the
   * leases of one multi-key acquisition (they share its token).
   */
  private readonly byToken = new Map<string, Lease | Lease[]>();
  /** Resolvers waiting for the moment no running scope holds a lease. */
  private idleWaiters: Array<() => void> = [];

  /** Records a granted lease. */
  add(lease: Lease): void {
    lease.heldPrev = undefined;
    lease.heldNext = this.newest;
    if (this.newest) this.newest.heldPrev = lease;
    this.newest = lease;
    if (!lease.info.backend.onLost) return;
    const { token } = lease.info;
    const there = this.byToken.get(token);
    if (there === undefined) this.byToken.set(token, lease);
    else if (Array.isArray(there)) there.push(lease);
    else this.byToken.set(token, [there, lease]);
  }

  /** Forgets a lease that ended (released or lost); a lease not held is left alone. */
  delete(lease: Lease): void {
    if (lease.heldPrev === lease) return;
    if (lease.heldPrev) lease.heldPrev.heldNext = lease.heldNext;
    else if (this.newest === lease) this.newest = lease.heldNext;
    else return; // never added
    if (lease.heldNext) lease.heldNext.heldPrev = lease.heldPrev;
    lease.heldPrev = lease; // off the list
    lease.heldNext = undefined;
    if (lease.info.backend.onLost) this.unindex(lease);
    if (this.idleWaiters.length > 0) this.checkIdle();
  }

  /** The held lease of (backend, full key, token) of a backend that reports losses, if any. */
  find(backend: string, fullKey: string, token: string): Lease | undefined {
    const there = this.byToken.get(token);
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
    for (let lease = this.newest; lease; lease = lease.heldNext) out.push(lease);
    return out;
  }

  /** Held leases no running scope holds (a bare `acquire()` whose work is not ours to wait for). */
  outsideScopes(): Lease[] {
    return this.all().filter((lease) => lease.scopes === 0);
  }

  /** Leases held by running `withLock`/`@Locked` work. */
  inFlight(): number {
    let n = 0;
    for (let lease = this.newest; lease; lease = lease.heldNext) if (lease.scopes > 0) n++;
    return n;
  }

  private unindex(lease: Lease): void {
    const { token } = lease.info;
    const there = this.byToken.get(token);
    if (there === lease) {
      this.byToken.delete(token);
    } else if (Array.isArray(there)) {
      const i = there.indexOf(lease);
      if (i >= 0) {
        there.splice(i, 1);
        if (there.length === 1) this.byToken.set(token, there[0]);
      }
    }
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
