import { Logger } from '@nestjs/common';
import { LockConfigError } from '../../errors/lock.errors';
import type {
  LockBackendHealth,
  LockEventListener,
  LockEventName,
  LockInfo,
  LockMetrics,
} from '../../lock.interfaces';
import type { LockBackend, StoreLockInfo } from '../contract/lock-backend';
import type { LockSettings } from '../settings/module-options';
import { validateKey } from '../settings/validation';
import { checkDuration, checkOptions } from '../shared/options';
import { Redactor } from '../shared/redactor';
import { withTimeout } from '../shared/timers';
import { Acquisition } from './acquisition';
import { DEFAULT_HEALTH_TIMEOUT_MS, pingBackends } from './backend-health';
import { BackendRegistry } from './backend-registry';
import { HeldLeases } from './held-leases';
import { LeaseReleaser } from './lease-releaser';
import { LeaseReporter } from './lease-reporter';
import { LockContext } from './lock-context';
import { LockEvents } from './lock-events';
import type { LockHandle } from './lock-handle';
import { checkGrantable, type LockRequest, prepareLockRequest } from './lock-request';
import { RenewalSchedulers } from './renewal-scheduler';
import { ShutdownCoordinator } from './shutdown-coordinator';
import { toLockError } from './store-error';

const KEY_QUERY_KEYS: ReadonlySet<string> = new Set(['backend']);
const HEALTH_KEYS: ReadonlySet<string> = new Set(['timeout', 'backends']);

/**
 * @internal The lock engine behind every `LockService`: a thin front over its parts, each one
 * idea — the configured backends ({@link BackendRegistry}), the acquisition loop
 * ({@link Acquisition}), the held leases and their scopes ({@link HeldLeases}), giving leases
 * back ({@link LeaseReleaser}), reentrancy scopes ({@link LockContext}), events and metrics
 * ({@link LockEvents}) and shutdown ({@link ShutdownCoordinator}).
 */
export class LockEngine {
  /** Events, metrics and logs. */
  readonly events: LockEvents;
  private readonly backends: BackendRegistry;
  private readonly context = new LockContext();
  private readonly held = new HeldLeases();
  private readonly shutdown: ShutdownCoordinator;
  private readonly releaser: LeaseReleaser;
  private readonly acquisition: Acquisition;
  private closed = false;
  private readonly redactor: Redactor;
  private readonly renewals: RenewalSchedulers;

  constructor(
    backends: ReadonlyMap<string, LockBackend>,
    /** Module-wide settings (read by tests and diagnostics). */
    readonly settings: LockSettings,
    private readonly logger = new Logger('LockService'),
  ) {
    this.backends = new BackendRegistry(backends, settings.defaultBackend);
    this.events = new LockEvents(logger, settings.otel);
    this.shutdown = new ShutdownCoordinator(settings.shutdown, logger);
    this.redactor = settings.redactor ?? new Redactor();
    const reporter = new LeaseReporter(this.held, this.events, this.redactor);
    this.renewals = new RenewalSchedulers(settings.operationTimeout);
    this.releaser = new LeaseReleaser(reporter, this.shutdown);
    this.acquisition = new Acquisition({
      context: this.context,
      held: this.held,
      events: this.events,
      reporter,
      releaser: this.releaser,
      shutdown: this.shutdown,
      operationTimeout: settings.operationTimeout,
      redactor: this.redactor,
      renewals: this.renewals,
    });
    for (const [name, backend] of this.backends.entries()) {
      this.events.register(name);
      backend.onLost?.((fullKey, token, reason) => {
        // The reason ends up in LockLostError messages and log lines: scrub it too.
        this.held.find(name, fullKey, token)?.markLost(this.redactor.text(reason));
      });
    }
  }

  /** The raw backend registered under `name` (for tests and advanced use). */
  getBackend(name: string): LockBackend {
    return this.backends.get(name);
  }

  /** Names of the configured backends. */
  backendNames(): string[] {
    return this.backends.names();
  }

  /**
   * Acquires `keys` (all or none). `mode: 'try'` makes one attempt and resolves `null` when
   * busy; `'wait'` waits up to `waitTimeout` and rejects `LockNotAcquiredError`.
   */
  acquire(
    keys: unknown,
    options: unknown,
    mode: 'try',
    backend?: string,
  ): Promise<LockHandle | null>;
  acquire(
    keys: unknown,
    options: unknown,
    mode: 'wait',
    backend?: string,
    label?: string,
  ): Promise<LockHandle>;
  acquire(
    keys: unknown,
    options: unknown,
    mode: 'try' | 'wait',
    defaultBackend?: string,
    label?: string,
  ): Promise<LockHandle | null> {
    let request: LockRequest;
    try {
      request = prepareLockRequest(
        keys,
        options,
        mode === 'try',
        this.settings,
        this.backends,
        defaultBackend,
      );
    } catch (err) {
      // Bad input rejects like any other failure (not a synchronous throw); not `async`, so
      // the hot path has no extra promise hop.
      return Promise.reject(err);
    }
    return this.acquisition.run(label === undefined ? request : { ...request, label }, mode);
  }

  /**
   * Whether the backend named in `options` (else `defaultBackend`, else the module's default)
   * grants `feature`: `'shared'` (`mode: 'shared'`) or `'permits'` (`permits` above 1). No I/O;
   * `LockConfigError` for an unknown backend.
   */
  supports(feature: 'shared' | 'permits', options: unknown, defaultBackend?: string): boolean {
    const backend = (options as { backend?: unknown } | undefined)?.backend;
    const name = this.backends.resolve(backend, defaultBackend);
    return this.backends.get(name).capabilities[feature] === true;
  }

  /**
   * The backend `options.backend` names (else the module's default), with its name; no I/O,
   * `LockConfigError` for an unknown one.
   */
  backendOf(options: { backend?: unknown } | undefined): { name: string; backend: LockBackend } {
    const name = this.backends.resolve(options?.backend);
    return { name, backend: this.backends.get(name) };
  }

  /**
   * Throws `LockConfigError` when `options` could never be granted here (invalid, an unknown
   * backend, or a `mode`/`permits` its backend cannot grant); no I/O.
   */
  checkGrantable(options: unknown): void {
    checkGrantable(options, this.backends);
  }

  /** Runs `fn` inside a reentrancy scope holding `handle` (work shutdown can wait for). */
  runInScope<T>(handle: LockHandle, fn: () => T): T {
    return this.held.runScoped(handle.leases, () => this.context.run(handle, fn));
  }

  /** Innermost unreleased lock of this async context. */
  current(): LockHandle | undefined {
    return this.context.current();
  }

  /**
   * Whether a scope of this async context holds `key` (as the user gave it) now, on any
   * backend; without a key, whether it holds any lock.
   */
  holdsInScope(key?: string): boolean {
    if (key === undefined) return this.current()?.isHeld() ?? false;
    const fullKey = this.settings.keyPrefix + key;
    return this.backends
      .names()
      .some((name) => this.context.find(name, fullKey)?.isHeld() === true);
  }

  /** Whether anyone holds `key` on the backend. */
  async isLocked(key: unknown, options: unknown, defaultBackend?: string): Promise<boolean> {
    const { backendName, backend, fullKey, k } = this.adminTarget(key, options, defaultBackend);
    try {
      return await withTimeout(backend.isLocked(fullKey), this.settings.operationTimeout);
    } catch (err) {
      throw toLockError(this.redactor, backendName, `isLocked failed for "${k}"`, err);
    }
  }

  /** The key and backend of a query or admin call (`{ backend }` is its only option). */
  private adminTarget(key: unknown, options: unknown, defaultBackend?: string) {
    const k = validateKey(key);
    const opts = options === undefined ? {} : checkOptions(options, KEY_QUERY_KEYS, 'options');
    const backendName = this.backends.resolve(opts.backend, defaultBackend);
    return {
      k,
      backendName,
      backend: this.backends.get(backendName),
      fullKey: this.settings.keyPrefix + k,
    };
  }

  private unsupported(backendName: string, call: string): LockConfigError {
    return new LockConfigError(
      'backend',
      `backend "${backendName}" cannot ${call} (see the README's backend table)`,
    );
  }

  /** What the store knows about `key`, and whether this process holds it. */
  async inspect(key: unknown, options: unknown, defaultBackend?: string): Promise<LockInfo> {
    // The holder's token is the right to release: never shown.
    const { owner: _owner, ...info } = await this.storeInfo(key, options, defaultBackend);
    return info;
  }

  /**
   * What the store knows about `key`, the exclusive holder's owner token included where the
   * store keeps it (for the engine's own recipes: leadership reads who leads from its label).
   */
  async storeInfo(
    key: unknown,
    options: unknown,
    defaultBackend?: string,
  ): Promise<StoreLockInfo & { mine: boolean }> {
    const { backendName, backend, fullKey, k } = this.adminTarget(key, options, defaultBackend);
    if (!backend.inspect) throw this.unsupported(backendName, 'inspect');
    try {
      const info = await withTimeout(backend.inspect(fullKey), this.settings.operationTimeout);
      const mine = this.held.ofKey(backendName, fullKey).some((lease) => lease.isHeld());
      return { ...info, mine };
    } catch (err) {
      throw toLockError(this.redactor, backendName, `inspect failed for "${k}"`, err);
    }
  }

  /**
   * Frees `key` whoever holds it (operators only). A lease this process held on it is reported
   * lost at once; another process's finds out at its next renewal.
   */
  async forceRelease(key: unknown, options: unknown, defaultBackend?: string): Promise<boolean> {
    const { backendName, backend, fullKey, k } = this.adminTarget(key, options, defaultBackend);
    if (!backend.forceRelease) throw this.unsupported(backendName, 'forceRelease');
    let freed: boolean;
    try {
      freed = await withTimeout(backend.forceRelease(fullKey), this.settings.operationTimeout);
    } catch (err) {
      throw toLockError(this.redactor, backendName, `forceRelease failed for "${k}"`, err);
    }
    for (const lease of this.held.ofKey(backendName, fullKey)) {
      lease.markLost('force-released by an operator (LockService.forceRelease)');
    }
    this.logger.warn(
      `lock "${k}" on "${backendName}" force-released (${freed ? 'it was held' : 'it was free'})`,
    );
    return freed;
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
    const opts = options === undefined ? {} : checkOptions(options, HEALTH_KEYS, 'options');
    const timeout =
      opts.timeout === undefined
        ? DEFAULT_HEALTH_TIMEOUT_MS
        : checkDuration(opts.timeout, 'options.timeout');
    let names = this.backends.names();
    if (opts.backends !== undefined) {
      if (!Array.isArray(opts.backends) || opts.backends.length === 0)
        throw new LockConfigError('options.backends', 'must be a non-empty array of backend names');
      names = opts.backends.map((n: unknown) => {
        if (typeof n !== 'string' || !this.backends.has(n)) throw this.backends.unknown(n);
        return n;
      });
    }
    return pingBackends(this.backends, names, timeout, this.shutdown.isClosing, this.redactor);
  }

  /** Metrics per backend. */
  getMetrics(): Record<string, LockMetrics> {
    return this.events.snapshot();
  }

  /**
   * Shutdown, first phase: refuse new acquisitions and cancel waits at once; then, with
   * `shutdown.inFlight: 'finish'`, give running work up to `shutdown.timeout` to finish and
   * release its locks itself; then release every lock still held (its signal aborts).
   */
  beforeShutdown(): Promise<void> {
    return this.shutdown.shutdown(this.held, (lease) => this.releaser.releaseNow(lease));
  }

  /** Shutdown, second phase: close every backend (each closes only the clients it created). */
  async close(): Promise<void> {
    await this.beforeShutdown();
    if (this.closed) return;
    this.closed = true;
    this.renewals.close();
    await this.backends.closeAll(this.logger, this.redactor);
  }
}
