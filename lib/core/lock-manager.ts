import { setMaxListeners } from 'node:events';
import { Logger } from '@nestjs/common';
import {
  LockBackendError,
  LockConfigError,
  LockError,
  LockLostError,
  LockNotAcquiredError,
} from '../errors/lock.errors';
import type { LockBackend, LockGrant } from '../backends/lock-backend.interface';
import type {
  LockBackendHealth,
  LockEvent,
  LockEventListener,
  LockEventName,
  LockMetrics,
} from '../lock.interfaces';
import { DEFAULT_HEALTH_TIMEOUT_MS, pingBackends } from './backend-health';
import { monotonicNow } from './clock';
import { Lease, type LeaseHost, messageOf, validityOf } from './lease';
import { LockContext } from './lock-context';
import { LockEvents } from './lock-events';
import type { OtelLockMetrics } from './otel-metrics';
import { LockHandle, type HandleHost } from './lock-handle';
import { newOwnerToken } from './token';
import { backoffDelay, sleep, unrefTimer, withTimeout } from './timers';
import {
  validateKey,
  validateKeys,
  validateLockOptions,
  validateObject,
  validateTtl,
} from './validation';

/** Module-wide settings after validation. */
export interface LockSettings {
  readonly defaultBackend: string;
  readonly keyPrefix: string;
  readonly ttl: number;
  readonly waitTimeout: number;
  readonly autoRenew: boolean;
  readonly notAcquiredHttpStatus: number | false;
  /** Bound on any single store call (ms); see `LockModuleOptions.operationTimeout`. */
  readonly operationTimeout: number;
  /** What shutdown does with locks held by running work; see `LockModuleOptions.shutdown`. */
  readonly shutdown: { readonly inFlight: 'finish' | 'abort'; readonly timeout: number };
  /** OpenTelemetry instruments, when `@opentelemetry/api` is installed and metrics are on. */
  readonly otel?: OtelLockMetrics;
}

/** One acquisition request after validation. */
interface AcquireRequest {
  readonly backendName: string;
  readonly backend: LockBackend;
  /** `[key, fullKey]` in canonical order. */
  readonly keys: ReadonlyArray<readonly [string, string]>;
  readonly ttl: number;
  readonly waitTimeout: number;
  readonly autoRenew: boolean;
  readonly lockAtLeastFor: number;
}

/** Upper bound on releasing held locks at shutdown, so a dead store cannot hang the app's exit. */
const SHUTDOWN_RELEASE_TIMEOUT_MS = 5_000;

/**
 * The lock engine: validation, reentrancy, waiting, multi-key ordering, leases, events and
 * shutdown — written once for every backend. `LockService` is its public face.
 */
export class LockManager implements LeaseHost, HandleHost {
  /** Events, metrics and logs. */
  readonly events: LockEvents;
  private readonly context = new LockContext();
  private readonly held = new Map<string, Lease>();
  /** lockAtLeastFor releases still to send on session stores, run early at shutdown. */
  private readonly deferred = new Map<NodeJS.Timeout, () => Promise<void>>();
  private readonly shutdown = new AbortController();
  private closing = false;
  private closed = false;
  /** Deferred releases asked for while shutting down: run by shutdown before the stores close. */
  private readonly closingReleases: (() => Promise<void>)[] = [];
  /** Resolves once no running work holds a lock, while shutdown waits for in-flight work. */
  private allEnded: (() => void) | undefined;

  constructor(
    private readonly backends: ReadonlyMap<string, LockBackend>,
    readonly settings: LockSettings,
    private readonly logger = new Logger('LockService'),
  ) {
    this.events = new LockEvents(logger, settings.otel);
    // Every waiting acquisition listens on this one signal; hundreds of waiters are normal.
    setMaxListeners(0, this.shutdown.signal);
    for (const [name, backend] of backends) {
      this.events.register(name);
      backend.onLost?.((fullKey, token, reason) => {
        this.held.get(ownerSlot(name, fullKey, token))?.markLost(reason);
      });
    }
  }

  /** The raw backend registered under `name` (for tests and advanced use). */
  getBackend(name: string): LockBackend {
    const backend = this.backends.get(name);
    if (!backend) throw this.unknownBackend(name);
    return backend;
  }

  /** Names of the configured backends. */
  backendNames(): string[] {
    return [...this.backends.keys()];
  }

  /**
   * Acquires `keys` (all or none). `mode: 'try'` makes one attempt and resolves `null` when
   * busy; `'wait'` waits up to `waitTimeout` and rejects `LockNotAcquiredError`.
   */
  async acquire(
    keys: unknown,
    options: unknown,
    mode: 'try',
    defaultBackend?: string,
  ): Promise<LockHandle | null>;
  async acquire(
    keys: unknown,
    options: unknown,
    mode: 'wait',
    defaultBackend?: string,
  ): Promise<LockHandle>;
  async acquire(
    keys: unknown,
    options: unknown,
    mode: 'try' | 'wait',
    defaultBackend?: string,
  ): Promise<LockHandle | null> {
    const req = this.prepare(keys, options, mode === 'try', defaultBackend);
    // Shutting down: no new locks, but work still running may re-enter the ones it holds.
    const reentering = ([, full]: readonly [string, string]): boolean => {
      const outer = this.context.find(req.backendName, full);
      return outer !== undefined && outer.state !== 'released';
    };
    if (this.closing && !req.keys.every(reentering)) {
      throw new LockBackendError(
        req.backendName,
        'the lock module is shutting down; no new acquisitions',
      );
    }
    const startedAt = monotonicNow();
    const token = newOwnerToken();
    const leases: Lease[] = [];
    try {
      for (const [key, fullKey] of req.keys) {
        const outer = this.context.find(req.backendName, fullKey);
        if (outer && outer.state !== 'released') {
          if (!outer.isHeld()) {
            throw new LockLostError(
              key,
              req.backendName,
              'the enclosing lock being re-entered was lost',
            );
          }
          outer.holders++;
          leases.push(outer);
          this.events.reentered(req.backendName);
          continue;
        }
        const waitMs =
          req.waitTimeout === Infinity
            ? Infinity
            : Math.max(0, startedAt + req.waitTimeout - monotonicNow());
        const lease = await this.acquireOne(req, key, fullKey, token, waitMs, startedAt);
        if (!lease)
          throw new LockNotAcquiredError(key, req.backendName, monotonicNow() - startedAt);
        leases.push(lease);
      }
    } catch (err) {
      // All or none: give back what this call took (or re-entered) before failing.
      await this.releaseLeases(leases.reverse()).catch(() => undefined);
      if (mode === 'try' && err instanceof LockNotAcquiredError) return null;
      throw err;
    }
    return new LockHandle(this, leases, req.backendName);
  }

  /** Runs `fn` inside a reentrancy scope holding `handle`. */
  runInScope<T>(handle: LockHandle, fn: () => T): T {
    const leases = handle.leases;
    for (const lease of leases) lease.scopes++;
    let result: T;
    try {
      result = this.context.run(handle, fn);
    } catch (err) {
      this.leaveScope(leases);
      throw err;
    }
    if (typeof (result as { then?: unknown } | null)?.then === 'function') {
      return Promise.resolve(result).finally(() => this.leaveScope(leases)) as T;
    }
    this.leaveScope(leases);
    return result;
  }

  private leaveScope(leases: readonly Lease[]): void {
    for (const lease of leases) lease.scopes--;
    this.checkInFlight();
  }

  /** Locks held by running `withLock`/`@Locked` work. */
  private inFlightCount(): number {
    let n = 0;
    for (const lease of this.held.values()) if (lease.scopes > 0) n++;
    return n;
  }

  /** While shutdown waits for running work: wakes it once none holds a lock any more. */
  private checkInFlight(): void {
    if (this.allEnded && this.inFlightCount() === 0) this.allEnded();
  }

  /** Innermost unreleased lock of this async context. */
  current(): LockHandle | undefined {
    return this.context.current();
  }

  /** Whether anyone holds `key` on the backend. */
  async isLocked(key: unknown, options: unknown, defaultBackend?: string): Promise<boolean> {
    const k = validateKey(key);
    const opts = options === undefined ? {} : validateObject(options, 'options');
    for (const name of Object.keys(opts)) {
      if (name !== 'backend') throw new LockConfigError(`options.${name}`, 'unknown option');
    }
    const backendName = this.resolveBackend(opts.backend, defaultBackend);
    const backend = this.getBackend(backendName);
    try {
      const timeout = this.settings.operationTimeout;
      return await withTimeout(
        backend.isLocked(this.settings.keyPrefix + k),
        timeout,
        () => new Error(`no answer within ${timeout} ms`),
      );
    } catch (err) {
      throw this.backendError(backendName, k, 'isLocked failed', err);
    }
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on(event: LockEventName, listener: LockEventListener): () => void {
    return this.events.on(event, listener);
  }

  /**
   * Pings backends (default all) in parallel, each bounded by `timeout`: per backend `up` or
   * `down` with the latency and the reason. Never rejects for a store's failure.
   */
  async health(options?: unknown): Promise<Record<string, LockBackendHealth>> {
    const opts = options === undefined ? {} : validateObject(options, 'options');
    for (const name of Object.keys(opts)) {
      if (name !== 'timeout' && name !== 'backends')
        throw new LockConfigError(`options.${name}`, 'unknown option');
    }
    const timeout =
      opts.timeout === undefined
        ? DEFAULT_HEALTH_TIMEOUT_MS
        : validateTtl(opts.timeout, 'options.timeout');
    let names = this.backendNames();
    if (opts.backends !== undefined) {
      if (!Array.isArray(opts.backends) || opts.backends.length === 0)
        throw new LockConfigError('options.backends', 'must be a non-empty array of backend names');
      names = opts.backends.map((n: unknown) => {
        if (typeof n !== 'string' || !this.backends.has(n)) throw this.unknownBackend(String(n));
        return n;
      });
    }
    return pingBackends(this.backends, names, timeout, this.closing);
  }

  /** Metrics per backend. */
  getMetrics(): Record<string, LockMetrics> {
    return this.events.snapshot();
  }

  /** Drops one holder from each lease (in the given order); the last holder really releases. */
  async releaseLeases(leases: readonly Lease[]): Promise<void> {
    let firstError: unknown;
    for (const lease of leases) {
      lease.holders--;
      if (lease.holders > 0 || lease.state !== 'held') continue;
      try {
        const result = await lease.finish('released');
        if (result.outcome === 'lost' && (lease.state as Lease['state']) === 'released') {
          // The store no longer had our token although our lease had not run out: a loss the
          // watchdog could not see (store restarted empty, key deleted by hand). Report it.
          this.reportLost(lease, 'the lock was found taken or expired at release');
        } else if (result.outcome !== 'lost') {
          if (result.outcome === 'deferred') this.deferRelease(lease, result.keepForMs);
          this.emit('released', lease, { heldMs: monotonicNow() - lease.acquiredAt });
        }
      } catch (err) {
        const error = this.backendError(
          lease.info.backendName,
          lease.info.key,
          'release failed',
          err,
        );
        this.emit('error', lease, { reason: error.message, error });
        firstError ??= error;
      }
    }
    if (firstError !== undefined) throw firstError;
  }

  /**
   * Shutdown, first phase: refuse new acquisitions and cancel waits at once; then, with
   * `shutdown.inFlight: 'finish'`, give running work up to `shutdown.timeout` to finish and
   * release its locks itself; then release every lock still held (its signal aborts).
   */
  async beforeShutdown(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.shutdown.abort();
    const { inFlight, timeout: finishMs } = this.settings.shutdown;
    let idle: Promise<void> | undefined;
    if (inFlight === 'finish' && this.inFlightCount() > 0) {
      // Locks no running scope holds (bare acquire()) have nothing to wait for: free them now.
      idle = this.releaseForShutdown(
        [...this.held.values()].filter((lease) => lease.scopes === 0),
        [],
      );
      this.logger.log(
        `waiting up to ${finishMs} ms for work holding ${this.inFlightCount()} lock(s) to finish`,
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => (this.allEnded = resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, finishMs))),
      ]);
      clearTimeout(timer);
      this.allEnded = undefined;
      if (this.inFlightCount() > 0) {
        this.logger.warn(
          `work holding ${this.inFlightCount()} lock(s) still running after ${finishMs} ms of shutdown: releasing them (their signals abort)`,
        );
      }
    }
    // lockAtLeastFor releases still pending on session stores go now, while clients are open.
    const deferred = [...this.deferred];
    this.deferred.clear();
    for (const [timer] of deferred) clearTimeout(timer);
    await Promise.all([idle, this.releaseForShutdown([...this.held.values()], deferred)]);
    // Ones the releases above deferred in turn (sent at once while closing, see deferRelease).
    await this.releaseForShutdown(
      [],
      this.closingReleases.splice(0).map((run) => [undefined, run]),
    );
  }

  /** Releases `leases` and runs `deferred` releases, bounded: a dead store cannot stall shutdown. */
  private async releaseForShutdown(
    leases: readonly Lease[],
    deferred: ReadonlyArray<readonly [NodeJS.Timeout | undefined, () => Promise<void>]>,
  ): Promise<void> {
    if (leases.length === 0 && deferred.length === 0) return;
    this.logger.log(`releasing ${leases.length} held lock(s) before shutdown`);
    const all = Promise.allSettled([
      ...leases.map(async (lease) => {
        lease.holders = 1;
        await this.releaseLeases([lease]);
      }),
      ...deferred.map(([, run]) => run()),
    ]);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), SHUTDOWN_RELEASE_TIMEOUT_MS);
    });
    const result = await Promise.race([all, timeout]);
    clearTimeout(timer);
    if (result === 'timeout') {
      this.logger.warn(
        `some locks were not released within ${SHUTDOWN_RELEASE_TIMEOUT_MS} ms; they will expire by their ttl`,
      );
    }
  }

  /** Shutdown, second phase: close every backend (each closes only the clients it created). */
  async close(): Promise<void> {
    await this.beforeShutdown();
    if (this.closed) return;
    this.closed = true;
    const results = await Promise.allSettled([...this.backends.values()].map((b) => b.close()));
    results.forEach((r, i) => {
      if (r.status === 'rejected') {
        this.logger.error(
          `closing backend "${[...this.backends.keys()][i]}" failed: ${messageOf(r.reason)}`,
        );
      }
    });
  }

  // LeaseHost

  leaseEnded(lease: Lease): void {
    this.held.delete(lease.slot);
    this.checkInFlight();
  }

  reportLost(lease: Lease, reason: string, cause?: unknown): void {
    this.emit('lost', lease, { heldMs: monotonicNow() - lease.acquiredAt, reason, error: cause });
  }

  reportRenewed(lease: Lease): void {
    this.emit('renewed', lease, {});
  }

  reportError(lease: Lease, reason: string, error: unknown): void {
    this.emit('error', lease, { reason, error });
  }

  // internals

  /**
   * lockAtLeastFor on a session store (no ttl to leave behind): send the release later. Before
   * shutdown closes the client, pending ones are sent at once (the session ends anyway).
   */
  private deferRelease(lease: Lease, keepForMs: number): void {
    const { backend, fullKey, token } = lease.info;
    const run = (): Promise<void> =>
      backend.release(fullKey, token).then(
        () => undefined,
        (err: unknown) =>
          this.reportError(lease, `deferred release failed: ${messageOf(err)}`, err),
      );
    if (this.closing) {
      // Shutting down: the store is about to be closed, so release now (shutdown awaits it).
      this.closingReleases.push(run);
      return;
    }
    const timer = unrefTimer(() => {
      this.deferred.delete(timer);
      void run();
    }, keepForMs);
    this.deferred.set(timer, run);
  }

  private prepare(
    keys: unknown,
    options: unknown,
    isTry: boolean,
    defaultBackend?: string,
  ): AcquireRequest {
    const list = validateKeys(keys);
    const opts = validateLockOptions(options);
    const backendName = this.resolveBackend(opts.backend, defaultBackend);
    const ttl = opts.ttl ?? this.settings.ttl;
    const wait = opts.waitTimeout ?? this.settings.waitTimeout;
    const autoRenew = opts.autoRenew ?? this.settings.autoRenew;
    const lockAtLeastFor = opts.lockAtLeastFor ?? 0;
    // Canonical order (by the key the store sees) so two multi-key requests never deadlock.
    const pairs = list
      .map((k) => [k, this.settings.keyPrefix + k] as const)
      .sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    return {
      backendName,
      backend: this.getBackend(backendName),
      keys: pairs,
      ttl,
      waitTimeout: isTry ? 0 : wait,
      autoRenew,
      lockAtLeastFor,
    };
  }

  private resolveBackend(value: unknown, fallback?: string): string {
    if (value === undefined) return fallback ?? this.settings.defaultBackend;
    if (typeof value !== 'string' || !this.backends.has(value)) throw this.unknownBackend(value);
    return value;
  }

  private unknownBackend(value: unknown): LockConfigError {
    return new LockConfigError(
      'backend',
      `unknown backend ${JSON.stringify(value) ?? String(value)}; configured: ${[...this.backends.keys()].join(', ')}`,
    );
  }

  /** One key: try, then wait (queued, event-driven or backoff) until granted or out of time. */
  private async acquireOne(
    req: AcquireRequest,
    key: string,
    fullKey: string,
    token: string,
    waitMs: number,
    startedAt: number,
  ): Promise<Lease | null> {
    const { backend, backendName } = req;
    const signal = this.shutdown.signal;
    const waitDeadline = monotonicNow() + waitMs;
    this.events.attempt(backendName);
    let contended = false;
    const onContended = (): void => {
      if (contended) return;
      contended = true;
      this.events.emit({
        type: 'contended',
        key,
        backend: backendName,
        token,
        waitedMs: monotonicNow() - startedAt,
      });
    };
    // A queue whose first step takes a free lock anyway: a separate try first would only add
    // a round trip (ZooKeeper: a node created and deleted) to every contended acquisition.
    const queueAtOnce = backend.capabilities.queueAtOnce === true && waitMs > 0;
    for (let attempt = 0; ; attempt++) {
      if (!queueAtOnce) {
        const sentAt = monotonicNow();
        const grant = await this.call(backendName, key, fullKey, token, 'acquire failed', () =>
          backend.tryAcquire(fullKey, token, req.ttl),
        );
        const lease =
          grant && this.grantToLease(req, key, fullKey, token, grant, sentAt, startedAt);
        if (lease) return lease;
        onContended();
      }
      const remaining = waitDeadline - monotonicNow();
      if (remaining <= 0) break;
      if (signal.aborted) throw this.shuttingDown(backendName);
      if (backend.acquire) {
        const queuedSentAt = monotonicNow();
        const queued = await this.call(
          backendName,
          key,
          fullKey,
          token,
          'acquire failed',
          () => backend.acquire!(fullKey, token, req.ttl, remaining, signal, onContended),
          remaining + this.settings.operationTimeout,
        );
        if (signal.aborted && !queued) throw this.shuttingDown(backendName);
        const queuedLease =
          queued && this.grantToLease(req, key, fullKey, token, queued, queuedSentAt, startedAt);
        if (queuedLease) return queuedLease;
        break;
      }
      await sleep(Math.min(remaining, backoffDelay(attempt)), signal);
      if (signal.aborted) throw this.shuttingDown(backendName);
    }
    this.events.notAcquired(backendName, monotonicNow() - startedAt);
    return null;
  }

  /** Turns a grant into a live lease, or refuses one that is already worthless. */
  private grantToLease(
    req: AcquireRequest,
    key: string,
    fullKey: string,
    token: string,
    grant: LockGrant,
    sentAt: number,
    startedAt: number,
  ): Lease | null {
    const from = grant.grantedAt ?? sentAt;
    const full = validityOf(req.backend, req.ttl);
    // A shorter store lease (a hand-over) is all we trust until it is extended to the ttl.
    const short = grant.validityMs !== undefined && grant.validityMs < full;
    const validity = short ? grant.validityMs! : full;
    if (from + validity <= monotonicNow()) {
      // Granted, but the lease already ran out on the way back (slow store, long pause).
      req.backend.release(fullKey, token).catch(() => undefined);
      return null;
    }
    if (this.closing) {
      // Granted while the module shuts down: give it back instead of leaking it past close().
      req.backend.release(fullKey, token).catch(() => undefined);
      return null;
    }
    const lease = new Lease(this, ownerSlot(req.backendName, fullKey, token), {
      backendName: req.backendName,
      backend: req.backend,
      key,
      fullKey,
      token,
      fence: grant.fence,
      ttl: req.ttl,
      startedAt: from,
      validityMs: validity,
      autoRenew: req.autoRenew,
      lockAtLeastFor: req.lockAtLeastFor,
      operationTimeout: this.settings.operationTimeout,
    });
    this.held.set(lease.slot, lease);
    lease.start(short);
    this.emit('acquired', lease, { waitedMs: monotonicNow() - startedAt });
    return lease;
  }

  /** Runs a backend call; a failure becomes `LockBackendError` (+ event) and frees anything half-taken. */
  private async call<T>(
    backendName: string,
    key: string,
    fullKey: string,
    token: string,
    what: string,
    fn: () => Promise<T>,
    timeoutMs = this.settings.operationTimeout,
  ): Promise<T> {
    const backend = this.getBackend(backendName);
    const attempt = fn();
    try {
      return await withTimeout(
        attempt,
        timeoutMs,
        () => new Error(`no answer within ${Math.round(timeoutMs)} ms`),
      );
    } catch (err) {
      const error = this.backendError(backendName, key, what, err);
      this.events.emit({
        type: 'error',
        key,
        backend: backendName,
        token,
        reason: error.message,
        error,
      });
      // The store may have granted anyway (reply lost, or it arrives after the timeout): free
      // it, now and once the late reply lands. Compare-token, so never someone else's lock.
      backend.release(fullKey, token).catch(() => undefined);
      attempt.then(
        (late) => late && backend.release(fullKey, token).catch(() => undefined),
        () => undefined,
      );
      throw error;
    }
  }

  private backendError(backendName: string, key: string, what: string, err: unknown): LockError {
    if (err instanceof LockError) return err;
    return new LockBackendError(backendName, `${what} for "${key}": ${messageOf(err)}`, {
      cause: err,
    });
  }

  private shuttingDown(backendName: string): LockBackendError {
    return new LockBackendError(backendName, 'the lock module is shutting down; wait cancelled');
  }

  private emit(type: LockEventName, lease: Lease, extra: Partial<LockEvent>): void {
    this.events.emit({
      type,
      key: lease.info.key,
      backend: lease.info.backendName,
      token: lease.info.token,
      fence: lease.info.fence,
      ...extra,
    });
  }
}

function ownerSlot(backend: string, fullKey: string, token: string): string {
  return `${LockContext.slot(backend, fullKey)}\u0000${token}`;
}
