import { LockConfigError } from '../errors/lock.errors';
import { MAX_TIMER_MS } from './timers';

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

/** A positive, finite duration in ms (ttl): `0`, negatives, NaN and Infinity are refused. */
export function validateTtl(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isFinite(value)) throw new LockConfigError(field, 'must be finite');
  if (value <= 0) throw new LockConfigError(field, `must be > 0, got ${value}`);
  if (value > MAX_TIMER_MS) throw new LockConfigError(field, `must be at most ${MAX_TIMER_MS} ms`);
  return Math.ceil(value);
}

/** A wait in ms: `0` = one try, `Infinity` = forever; negatives and NaN are refused. */
export function validateWait(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (value < 0) throw new LockConfigError(field, `must be >= 0, got ${value}`);
  return value;
}

/** A finite, non-negative duration in ms (lockAtLeastFor). */
export function validateNonNegativeFinite(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isFinite(value)) throw new LockConfigError(field, 'must be finite');
  if (value < 0) throw new LockConfigError(field, `must be >= 0, got ${value}`);
  if (value > MAX_TIMER_MS) throw new LockConfigError(field, `must be at most ${MAX_TIMER_MS} ms`);
  return value;
}

/** A boolean option. */
export function validateBoolean(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') {
    throw new LockConfigError(field, `must be true or false, got ${describe(value)}`);
  }
  return value;
}

/** A plain object (options bags). */
export function validateObject(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new LockConfigError(field, `must be an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

/** Short description of a bad value for error messages (never dumps whole objects). */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `"${value.length > 40 ? value.slice(0, 40) + '…' : value}"`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

/** Per-acquisition options after validation (unset fields stay unset, for defaults to fill). */
export interface CheckedLockOptions {
  backend?: unknown;
  ttl?: number;
  waitTimeout?: number;
  autoRenew?: boolean;
  lockAtLeastFor?: number;
}

const LOCK_OPTION_KEYS = new Set(['backend', 'ttl', 'waitTimeout', 'autoRenew', 'lockAtLeastFor']);

/**
 * Validates the shape of `LockOptions` (unknown keys are refused so a typo such as `timeout`
 * is not silently ignored). The backend name is checked later, against the configured ones.
 */
export function validateLockOptions(options: unknown): CheckedLockOptions {
  if (options === undefined) return {};
  const o = validateObject(options, 'options');
  for (const name of Object.keys(o)) {
    if (!LOCK_OPTION_KEYS.has(name)) throw new LockConfigError(`options.${name}`, 'unknown option');
  }
  return {
    backend: o.backend,
    ttl: o.ttl === undefined ? undefined : validateTtl(o.ttl, 'ttl'),
    waitTimeout:
      o.waitTimeout === undefined ? undefined : validateWait(o.waitTimeout, 'waitTimeout'),
    autoRenew: o.autoRenew === undefined ? undefined : validateBoolean(o.autoRenew, 'autoRenew'),
    lockAtLeastFor:
      o.lockAtLeastFor === undefined
        ? undefined
        : validateNonNegativeFinite(o.lockAtLeastFor, 'lockAtLeastFor'),
  };
}
