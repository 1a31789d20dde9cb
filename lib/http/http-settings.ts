import { LockConfigError } from '../errors/lock.errors';
import { checkOptions, copyOwnOptions, describe } from '../core/shared/options';

/** Default status of a busy lock on an HTTP route. */
export const DEFAULT_NOT_ACQUIRED_HTTP_STATUS = 409;
/** Default status of a store that failed, or of an application shutting down, on a route. */
export const DEFAULT_UNAVAILABLE_HTTP_STATUS = 503;
/** Default `Retry-After` seconds: a busy lock is usually free soon; a store takes longer. */
export const DEFAULT_RETRY_AFTER_SECONDS = { notAcquired: 1, unavailable: 5 } as const;

/** The module options the HTTP mapping reads (the engine accepts them as known, never reads them). */
export const HTTP_OPTION_KEYS = [
  'notAcquiredHttpStatus',
  'unavailableHttpStatus',
  'retryAfterSeconds',
] as const;
const RETRY_AFTER_KEYS: ReadonlySet<string> = new Set(['notAcquired', 'unavailable']);

/** Injection token of the {@link LockHttpSettings} of a `LockModule`. */
export const LOCK_HTTP_SETTINGS = Symbol('nestjs-distributed-lock:LockHttpSettings');

/** How lock errors on HTTP routes become responses. */
export interface LockHttpSettings {
  /** Status for `LockNotAcquiredError` and `LockAbortedError`, or `false` to leave them to the app. */
  readonly notAcquiredStatus: number | false;
  /** Status for `LockBackendError` and `LockShuttingDownError`, or `false` to leave them to the app. */
  readonly unavailableStatus: number | false;
  /** `Retry-After` seconds sent with each, or `false` for none. */
  readonly retryAfter: {
    readonly notAcquired: number | false;
    readonly unavailable: number | false;
  };
}

/** Reads and validates the HTTP settings from the module options (`LockConfigError` naming the field). */
export function readHttpSettings(options: unknown): LockHttpSettings {
  // Own fields, each read once: a getter or proxy that throws is a LockConfigError too.
  const o = copyOwnOptions(options, 'options', '');
  const retry =
    o.retryAfterSeconds === undefined
      ? {}
      : checkOptions(o.retryAfterSeconds, RETRY_AFTER_KEYS, 'retryAfterSeconds');
  return {
    notAcquiredStatus: httpStatus(
      o.notAcquiredHttpStatus,
      'notAcquiredHttpStatus',
      DEFAULT_NOT_ACQUIRED_HTTP_STATUS,
    ),
    unavailableStatus: httpStatus(
      o.unavailableHttpStatus,
      'unavailableHttpStatus',
      DEFAULT_UNAVAILABLE_HTTP_STATUS,
    ),
    retryAfter: {
      notAcquired: seconds(
        retry.notAcquired,
        'retryAfterSeconds.notAcquired',
        DEFAULT_RETRY_AFTER_SECONDS.notAcquired,
      ),
      unavailable: seconds(
        retry.unavailable,
        'retryAfterSeconds.unavailable',
        DEFAULT_RETRY_AFTER_SECONDS.unavailable,
      ),
    },
  };
}

function httpStatus(value: unknown, field: string, fallback: number): number | false {
  const status = value ?? fallback;
  if (status === false) return false;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 599) {
    throw new LockConfigError(field, 'must be an HTTP error status (400-599) or false');
  }
  return status;
}

function seconds(value: unknown, field: string, fallback: number): number | false {
  const s = value ?? fallback;
  if (s === false) return false;
  if (typeof s !== 'number' || !Number.isInteger(s) || s < 0 || s > 86_400) {
    throw new LockConfigError(
      field,
      `must be whole seconds (0-86400) or false, got ${describe(value)}`,
    );
  }
  return s;
}
