import { LockConfigError } from '../../errors/lock.errors';
import {
  checkBoolean,
  checkDuration,
  checkNonNegativeDuration,
  checkOptions,
  checkWait,
  describe,
} from '../shared/options';

/**
 * Longest accepted key (before the prefix), in characters. Generous (keys built from ids and
 * JSON fit), but bounded so a runaway template cannot ship megabytes to the store; backends
 * with short name limits (ZooKeeper node names, SQL key columns) hash long keys themselves.
 */
export const MAX_KEY_LENGTH = 16_384;
/** Most keys in one multi-key lock. */
export const MAX_KEYS = 64;

/**
 * Checks one key and returns it. A key must be a non-empty string of at most
 * {@link MAX_KEY_LENGTH} characters: anything else would lock the wrong thing (or nothing).
 */
export function validateKey(key: unknown, field = 'key'): string {
  if (typeof key !== 'string') {
    throw new LockConfigError(field, `must be a string, got ${describe(key)}`);
  }
  if (key.length === 0) throw new LockConfigError(field, 'must not be empty');
  if (key.length > MAX_KEY_LENGTH) {
    throw new LockConfigError(
      field,
      `must be at most ${MAX_KEY_LENGTH} characters, got ${key.length}`,
    );
  }
  return key;
}

/** Checks a key or key list; returns the distinct keys (duplicates would self-deadlock). */
export function validateKeys(keys: unknown, field = 'key'): string[] {
  if (!Array.isArray(keys)) return [validateKey(keys, field)];
  if (keys.length === 0) throw new LockConfigError(field, 'must not be an empty array');
  if (keys.length > MAX_KEYS) {
    throw new LockConfigError(field, `must hold at most ${MAX_KEYS} keys, got ${keys.length}`);
  }
  return [...new Set(keys.map((k, i) => validateKey(k, `${field}[${i}]`)))];
}

/** Per-acquisition options after validation (unset fields stay unset, for defaults to fill). */
export interface CheckedLockOptions {
  backend?: unknown;
  ttl?: number;
  waitTimeout?: number;
  autoRenew?: boolean;
  lockAtLeastFor?: number;
}

const LOCK_OPTION_KEYS: ReadonlySet<string> = new Set([
  'backend',
  'ttl',
  'waitTimeout',
  'autoRenew',
  'lockAtLeastFor',
]);

/**
 * Validates the shape of `LockOptions` (unknown keys are refused so a typo such as `timeout`
 * is not silently ignored). The backend name is checked later, against the configured ones.
 */
export function validateLockOptions(options: unknown): CheckedLockOptions {
  if (options === undefined) return {};
  const o = checkOptions(options, LOCK_OPTION_KEYS, 'options');
  return {
    backend: o.backend,
    ttl: o.ttl === undefined ? undefined : checkDuration(o.ttl, 'ttl'),
    waitTimeout: o.waitTimeout === undefined ? undefined : checkWait(o.waitTimeout, 'waitTimeout'),
    autoRenew: o.autoRenew === undefined ? undefined : checkBoolean(o.autoRenew, 'autoRenew'),
    lockAtLeastFor:
      o.lockAtLeastFor === undefined
        ? undefined
        : checkNonNegativeDuration(o.lockAtLeastFor, 'lockAtLeastFor'),
  };
}
