import { LockBackendError, LockError } from '../../errors/lock.errors';
import { messageOf } from '../shared/error-message';

/**
 * A store call's failure as the `LockError` callers get: a `LockError` passes through (a
 * backend may raise `LockConfigError` or `LockBackendError` itself); anything else becomes
 * `LockBackendError` saying what failed, with the original as `cause`.
 */
export function toLockError(backendName: string, what: string, err: unknown): LockError {
  if (err instanceof LockError) return err;
  return new LockBackendError(backendName, `${what}: ${messageOf(err)}`, { cause: err });
}
