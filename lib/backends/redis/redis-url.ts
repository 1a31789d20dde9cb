import { LockConfigError } from '../../errors/lock.errors';

/**
 * A `redis://` or `rediss://` URL that `new URL` accepts, checked at bootstrap so a malformed
 * one is a `LockConfigError` naming the field instead of a parse error when the client starts.
 */
export function checkRedisUrl(value: unknown, field: string): string {
  if (typeof value !== 'string' || !/^rediss?:\/\/[^\s]+$/.test(value)) {
    throw new LockConfigError(field, 'must be a redis:// or rediss:// URL');
  }
  try {
    new URL(value);
  } catch {
    throw new LockConfigError(field, 'is not a valid URL');
  }
  return value;
}
