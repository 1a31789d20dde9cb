import { LockConfigError } from '../../errors/lock.errors';
import type { SessionLock } from './sql-lock-strategy';

/**
 * The refusal of a session lock whose key is held or awaited with other `permits` (a counted
 * lock beside a mutex, a reader, or a count of another size): granting it would let more in
 * than one of them asked for, so it is refused instead, as the memory backend does.
 */
export function permitsDisagreement(lock: SessionLock): LockConfigError {
  return new LockConfigError(
    'permits',
    `"${lock.key}" is held or awaited with other permits than this request's ` +
      `${lock.permits} (mode '${lock.mode}'): every holder and waiter of a key must ask the same permits`,
  );
}
