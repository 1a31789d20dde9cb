import { LockBackendError, LockError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../contract/backend-factory';

/**
 * A store call's failure as the `LockError` callers get: a `LockError` passes through (a
 * backend may raise `LockConfigError` or `LockBackendError` itself); anything else becomes
 * `LockBackendError` saying what failed, with a redacted copy of the original as `cause`: a
 * client's error object (with its command arguments and options) never leaves the module.
 */
export function toLockError(
  redactor: SecretRedactor,
  backendName: string,
  what: string,
  err: unknown,
): LockError {
  if (err instanceof LockError) return err;
  return new LockBackendError(backendName, `${what}: ${redactor.message(err)}`, {
    cause: redactor.error(err),
  });
}
