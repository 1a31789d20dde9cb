/**
 * Every error this library throws on purpose extends {@link LockError} and carries a stable
 * `code`, so callers can branch on `err.code` (or `instanceof`) without parsing messages.
 */
export type LockErrorCode =
  | 'LOCK_NOT_ACQUIRED'
  | 'LOCK_ABORTED'
  | 'LOCK_LOST'
  | 'LOCK_CONFIG'
  | 'LOCK_BACKEND'
  | 'LOCK_SHUTTING_DOWN';

/** Base class of all errors raised by nestjs-distributed-lock. */
export abstract class LockError extends Error {
  /** Stable machine-readable code. */
  abstract readonly code: LockErrorCode;

  protected constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The lock was still busy when `waitTimeout` ran out (or at once, for `tryAcquire`/`waitTimeout: 0`). */
export class LockNotAcquiredError extends LockError {
  readonly code = 'LOCK_NOT_ACQUIRED' as const;

  constructor(
    /** The key (or first busy key of a multi-key request), without prefix. */
    readonly key: string,
    /** The backend name. */
    readonly backend: string,
    /** How long the caller waited, in milliseconds. */
    readonly waitedMs: number,
  ) {
    super(`Lock "${key}" on backend "${backend}" is busy (waited ${Math.round(waitedMs)} ms)`);
  }
}

/** The lock was lost while held (lease expired, renewal refused, session or connection gone). */
export class LockLostError extends LockError {
  readonly code = 'LOCK_LOST' as const;

  constructor(
    /** The key, without prefix. */
    readonly key: string,
    /** The backend name. */
    readonly backend: string,
    /** Why the lock was lost. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`Lock "${key}" on backend "${backend}" was lost: ${reason}`, options);
  }
}

/** Bad options or bad input, raised before any I/O. `field` names what was wrong. */
export class LockConfigError extends LockError {
  readonly code = 'LOCK_CONFIG' as const;

  constructor(
    /** Path of the offending option or argument, e.g. `backends.main.url` or `ttl`. */
    readonly field: string,
    /** What is wrong with it. */
    readonly detail: string,
    /** Where it was given, when known, e.g. `@Locked on InventoryService.deduct`. */
    readonly where?: string,
  ) {
    super(`Invalid lock configuration${where ? ` in ${where}` : ''}: ${field}: ${detail}`);
  }
}

/** The backend failed or could not be reached; `cause` holds the underlying error. */
export class LockBackendError extends LockError {
  readonly code = 'LOCK_BACKEND' as const;

  constructor(
    /** The backend name. */
    readonly backend: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`Lock backend "${backend}": ${message}`, options);
  }
}

/**
 * The caller's `signal` aborted before the lock was granted. The wait stopped at once and left
 * nothing in the store; `cause` is the signal's reason.
 */
export class LockAbortedError extends LockError {
  readonly code = 'LOCK_ABORTED' as const;

  constructor(
    /** The key (or first key not yet granted of a multi-key request), without prefix. */
    readonly key: string,
    /** The backend name. */
    readonly backend: string,
    reason: unknown,
  ) {
    super(`Lock "${key}" on backend "${backend}": the wait was aborted by the caller's signal`, {
      cause: reason,
    });
  }
}

/**
 * A new lock was asked for (or a wait was cancelled) while the application shuts down: not a
 * store failure. Work already holding a lock may still re-enter it.
 */
export class LockShuttingDownError extends LockError {
  readonly code = 'LOCK_SHUTTING_DOWN' as const;

  constructor(
    /** The backend name. */
    readonly backend: string,
    detail: string,
  ) {
    super(`Lock backend "${backend}": the lock module is shutting down; ${detail}`);
  }
}
