import { LockConfigError } from './errors/lock.errors';
import type { LockEngine } from './core/engine/lock-engine';
import type {
  Lock,
  LockBackendHealth,
  LockHealthOptions,
  LockInfo,
  LockEventListener,
  LockEventName,
  LockMetrics,
  LockOptions,
} from './lock.interfaces';

/**
 * Acquire, try, scope and inspect distributed locks. Inject it anywhere once `LockModule` is
 * imported; `@InjectLockBackend(name)` gives one whose default backend is `name`.
 */
export class LockService {
  /** Built by `LockModule` (inject it); not constructed by users. */
  private constructor(
    private readonly engine: LockEngine,
    private readonly backend?: string,
  ) {}

  /** @internal The service of `engine`, defaulting to backend `backend` when given. */
  static of(engine: LockEngine, backend?: string): LockService {
    return new LockService(engine, backend);
  }

  /**
   * Acquires `key` (or all of `keys`, in canonical order, all or none), waiting up to
   * `waitTimeout`; rejects with `LockNotAcquiredError` if still busy. Inside a `withLock` or
   * `@Locked` scope that holds the key, it re-enters without a backend call.
   */
  acquire(key: string | string[], opts?: LockOptions): Promise<Lock> {
    return this.engine.acquire(key, opts, 'wait', this.backend);
  }

  /** One attempt, never waits: the lock, or `null` when busy. */
  tryAcquire(key: string | string[], opts?: LockOptions): Promise<Lock | null> {
    return this.engine.acquire(key, opts, 'try', this.backend);
  }

  /**
   * Runs `fn` holding the lock, renewing it meanwhile, and releases it when `fn` settles.
   * `fn`'s own error is rethrown unchanged. Nested acquisitions of the same key re-enter.
   */
  async withLock<T>(
    key: string | string[],
    fn: (lock: Lock) => T | Promise<T>,
    opts?: LockOptions,
  ): Promise<T> {
    if (typeof fn !== 'function') throw new LockConfigError('fn', 'must be a function');
    const lock = await this.engine.acquire(key, opts, 'wait', this.backend);
    try {
      return await this.engine.runInScope(lock, () => fn(lock));
    } finally {
      // Awaited, and never allowed to replace fn's outcome: a failed release is reported by
      // the 'error' event and the lock then ends by its ttl.
      await lock.release().catch(() => undefined);
    }
  }

  /** Whether anyone holds `key` now. */
  isLocked(key: string, opts?: { backend?: string }): Promise<boolean> {
    return this.engine.isLocked(key, opts, this.backend);
  }

  /**
   * What the store knows about `key` now: held or not, the fence (the holder's, or when free
   * the last one handed out), the lease left and the queue length where the store keeps them,
   * and whether this process holds it. `LockConfigError` on a backend that cannot tell.
   */
  inspect(key: string, opts?: { backend?: string }): Promise<LockInfo> {
    return this.engine.inspect(key, opts, this.backend);
  }

  /**
   * **Operators only, dangerous:** frees `key` whoever holds it; `true` when a holder was
   * removed. The holder is not stopped: it learns of the loss at its next renewal (its `signal`
   * aborts), and until then it may still act, which only fencing makes safe (the next grant's
   * fence is higher, so a store that checks fences refuses the stale holder's writes). Use it to
   * clear a lock left by a holder you know is gone.
   */
  forceRelease(key: string, opts?: { backend?: string }): Promise<boolean> {
    return this.engine.forceRelease(key, opts, this.backend);
  }

  /**
   * Whether a backend (`opts.backend`, else this service's default) grants `'shared'` locks
   * (`mode: 'shared'`) or `'permits'` (counted locks, `permits` above 1), so an app that runs on
   * several stores can choose before asking: a request the backend cannot grant is refused with
   * `LockConfigError`. No I/O; `LockConfigError` for an unknown backend.
   */
  supports(feature: 'shared' | 'permits', opts?: { backend?: string }): boolean {
    if (feature !== 'shared' && feature !== 'permits') {
      throw new LockConfigError('feature', `must be 'shared' or 'permits'`);
    }
    return this.engine.supports(feature, opts, this.backend);
  }

  /** The innermost lock held by the current `withLock`/`@Locked` scope, if any. */
  current(): Lock | undefined {
    return this.engine.current();
  }

  /**
   * Subscribes to lock events (`acquired`, `released`, `contended`, `renewed`, `lost`,
   * `error`) of every backend; returns the unsubscribe function.
   */
  on(event: LockEventName, listener: LockEventListener): () => void {
    return this.engine.on(event, listener);
  }

  /**
   * Pings every configured backend (or `options.backends`) in parallel, each bounded by
   * `options.timeout` (default 1 000 ms): `up`/`down` per backend with latency and reason.
   * Resolves even when stores are down; rejects only for bad options (`LockConfigError`).
   */
  health(options?: LockHealthOptions): Promise<Record<string, LockBackendHealth>> {
    return this.engine.health(options);
  }

  /** Counters and sums per backend (attempts, acquired, not acquired, lost, wait and hold time). */
  getMetrics(): Record<string, LockMetrics> {
    return this.engine.getMetrics();
  }
}
