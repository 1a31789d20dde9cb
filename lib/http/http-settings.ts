import { LockConfigError } from '../errors/lock.errors';
import { checkObject } from '../core/shared/options';

/** Default status of a busy lock on an HTTP route. */
export const DEFAULT_NOT_ACQUIRED_HTTP_STATUS = 409;

/** The module options the HTTP mapping reads (the engine accepts them as known, never reads them). */
export const HTTP_OPTION_KEYS = ['notAcquiredHttpStatus'] as const;

/** Injection token of the {@link LockHttpSettings} of a `LockModule`. */
export const LOCK_HTTP_SETTINGS = Symbol('nestjs-distributed-lock:LockHttpSettings');

/** How lock errors on HTTP routes become responses. */
export interface LockHttpSettings {
  /** Status for `LockNotAcquiredError`, or `false` to leave it to the app's exception filters. */
  readonly notAcquiredStatus: number | false;
}

/** Reads and validates the HTTP settings from the module options (`LockConfigError` naming the field). */
export function readHttpSettings(options: unknown): LockHttpSettings {
  const status =
    checkObject(options, 'options').notAcquiredHttpStatus ?? DEFAULT_NOT_ACQUIRED_HTTP_STATUS;
  if (
    status !== false &&
    !(Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599)
  ) {
    throw new LockConfigError(
      'notAcquiredHttpStatus',
      'must be an HTTP error status (400-599) or false',
    );
  }
  return { notAcquiredStatus: status as number | false };
}
