/**
 * The options of `LockModule.forRoot` / `forRootAsync`. Apart from the per-call types in
 * `lock.interfaces.ts` because they name every backend's configuration: the engine reads
 * per-call types and never needs to know the backends.
 */
import type { LockBackendConfig } from './backends/backend-config';

/** Defaults applied to every acquisition that does not set its own. */
export interface LockDefaults {
  /** Lease in ms (default 30 000). */
  ttl?: number;
  /** Wait in ms (default 10 000). */
  waitTimeout?: number;
  /** Renew while held (default `true`). */
  autoRenew?: boolean;
  /** Hard cap on holding any lock, ms (default: none); see `LockOptions.maxHold`. */
  maxHold?: number;
}

/** Options of `LockModule.forRoot` / the factory of `forRootAsync`. */
export interface LockModuleOptions {
  /** Named backends; every name gets a provider (`getLockBackendToken(name)`). */
  backends: Record<string, LockBackendConfig>;
  /** Backend used when an acquisition names none; optional when exactly one backend is configured. */
  defaultBackend?: string;
  /** Defaults for ttl, waitTimeout and autoRenew. */
  defaults?: LockDefaults;
  /** Namespace prepended to every key on every backend (e.g. `'app:'`). */
  keyPrefix?: string;
  /**
   * HTTP status sent when a route handler (or anything it calls) throws
   * `LockNotAcquiredError`, or `LockAbortedError` (default `409`; `423 Locked` is the other
   * common choice); `false` leaves the error to your exception filters.
   */
  notAcquiredHttpStatus?: number | false;
  /**
   * HTTP status sent when a route handler throws `LockBackendError` (the store failed or is
   * unreachable) or `LockShuttingDownError` (the app is draining) (default `503`); `false`
   * leaves them to your exception filters. Never a 500 for a lock problem.
   */
  unavailableHttpStatus?: number | false;
  /**
   * `Retry-After` header, in whole seconds, sent with those answers (defaults: `notAcquired: 1`,
   * `unavailable: 5`); `false` sends none.
   */
  retryAfterSeconds?: {
    /** With `notAcquiredHttpStatus` (default 1). */
    notAcquired?: number | false;
    /** With `unavailableHttpStatus` (default 5). */
    unavailable?: number | false;
  };
  /**
   * Longest wait, in ms, for any single store call (acquire attempt, renewal, release, isLocked)
   * before it fails with `LockBackendError` (default 5 000). A store that stops answering can
   * then never hang a caller; a grant that arrives late is released.
   */
  operationTimeout?: number;
  /**
   * What application shutdown (`app.close()`, SIGTERM with `enableShutdownHooks()`) does with
   * locks held by work still running. New acquisitions are refused and waits cancelled at once
   * either way; clients the module created are closed after the locks are released.
   */
  shutdown?: LockShutdownOptions;
  /**
   * Record lock metrics through the OpenTelemetry metrics API (default `true`; needs the
   * optional package `@opentelemetry/api`, and your SDK's meter provider registered before the
   * app is created; without an SDK the API is a no-op). Labelled by backend only.
   */
  metrics?: boolean;
  /**
   * This instance's name among leadership candidates (`LeaderService.id`, what `leader(name)`
   * reports while it leads): 1 to 128 characters, default `<host name>:<pid>`.
   */
  leaderId?: string;
}

/** `LockModuleOptions.shutdown`. */
export interface LockShutdownOptions {
  /**
   * `'finish'` (default): work running under `withLock`/`@Locked` keeps its locks and gets up
   * to `timeout` ms to finish and release them; what is still held then is released (its
   * `signal` aborts). Locks from a bare `acquire()` have no scope to wait for: they are
   * released at once.
   * `'abort'`: every held lock is released at once and its `signal` aborts with
   * `LockLostError`, so work that watches `lock.signal` stops (work that ignores it would run
   * on unlocked: prefer `'finish'` unless your handlers honour the signal).
   */
  inFlight?: 'finish' | 'abort';
  /** With `'finish'`: longest wait for running work, ms (default 10 000). */
  timeout?: number;
}
