import { LockConfigError } from '../../errors/lock.errors';
import type { LockMode } from '../../lock.interfaces';
import {
  checkBoolean,
  checkDuration,
  checkNonNegativeDuration,
  checkOptions,
  checkWait,
  describe,
  readOption,
} from '../shared/options';

/**
 * Shortest accepted ttl, ms. A lease of a few ms runs out before the grant's reply is back (it
 * is then refused as worthless and a free key reads as busy), and stores that subtract clock
 * drift (Redlock) have nothing left of it. Compared before rounding: 99.5 is refused (it is
 * below the minimum), 100.5 is accepted and rounded up to 101.
 */
export const MIN_TTL_MS = 100;

/**
 * Longest accepted key (before the prefix), in characters. Generous (keys built from ids and
 * JSON fit), but bounded so a runaway template cannot ship megabytes to the store; backends
 * with short name limits (ZooKeeper node names, SQL key columns) hash long keys themselves.
 */
export const MAX_KEY_LENGTH = 16_384;
/** Most keys in one multi-key lock. */
export const MAX_KEYS = 64;
/**
 * Most `permits` of a counted lock. Stores keep one slot (row, node, key) per permit and
 * `inspect` lists the slots held, so the bound keeps both small; a pool of more than 1024
 * interchangeable slots is a rate limit, not a lock.
 */
export const MAX_PERMITS = 1024;

/**
 * Checks one key and returns it. A key must be a non-empty string of at most
 * {@link MAX_KEY_LENGTH} characters: anything else would lock the wrong thing (or nothing).
 */
export function validateKey(key: unknown, field = 'key'): string {
  if (typeof key !== 'string') {
    throw new LockConfigError(field, `must be a string, got ${describe(key)}`);
  }
  if (key.length === 0) throw new LockConfigError(field, 'must not be empty');
  checkKeyText(key, field);
  if (key.length > MAX_KEY_LENGTH) {
    throw new LockConfigError(
      field,
      `must be at most ${MAX_KEY_LENGTH} characters, got ${key.length}`,
    );
  }
  return key;
}

/**
 * A key is text every store keeps as it is: no NUL (PostgreSQL refuses it in text) and no lone
 * UTF-16 surrogate (UTF-8 has no encoding for one: stores would turn distinct keys such as
 * `'\ud800'` and `'\udbff'` into the same replacement character, one lock for two keys).
 * Also applied to the module's `keyPrefix`.
 */
export function checkKeyText(text: string, field: string): void {
  if (text.includes('\u0000')) throw new LockConfigError(field, 'must not contain NUL (\\u0000)');
  if (LONE_SURROGATE.test(text)) {
    throw new LockConfigError(
      field,
      'must be well-formed Unicode (a lone surrogate such as \\ud800 has no UTF-8 form)',
    );
  }
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A lease ttl: a duration of at least {@link MIN_TTL_MS} (as given, before rounding up). */
export function checkTtl(value: unknown, field: string): number {
  const ttl = checkDuration(value, field);
  if ((value as number) < MIN_TTL_MS) {
    throw new LockConfigError(field, `must be at least ${MIN_TTL_MS} ms, got ${String(value)}`);
  }
  return ttl;
}

/** An `AbortSignal` (duck-typed: a signal from another realm or polyfill works too). */
export function checkSignal(value: unknown, field: string): AbortSignal {
  const signal = value as Partial<AbortSignal> | null;
  if (
    typeof signal !== 'object' ||
    signal === null ||
    !readOption(
      field,
      () =>
        typeof signal.aborted === 'boolean' &&
        typeof signal.addEventListener === 'function' &&
        typeof signal.removeEventListener === 'function',
    )
  ) {
    throw new LockConfigError(field, `must be an AbortSignal, got ${describe(value)}`);
  }
  return value as AbortSignal;
}

/**
 * A backend name's type (a string); whether it is a configured one is checked against the
 * module's backends. Checked here so a value no message can quote (a bigint, a symbol) is
 * refused before anything tries to.
 */
export function checkBackendName(value: unknown, field: string): string {
  if (typeof value !== 'string') {
    throw new LockConfigError(field, `must be a backend name (a string), got ${describe(value)}`);
  }
  return value;
}

/**
 * Checks a key or key list; returns the distinct keys (duplicates would self-deadlock). A list
 * is copied once (an array-like proxy or a getter element that throws is a refusal).
 */
export function validateKeys(keys: unknown, field = 'key'): string[] {
  if (typeof keys !== 'object' || keys === null || !readOption(field, () => Array.isArray(keys))) {
    return [validateKey(keys, field)];
  }
  const list = readOption(field, () => Array.from(keys as unknown[]));
  if (list.length === 0) throw new LockConfigError(field, 'must not be an empty array');
  if (list.length > MAX_KEYS) {
    throw new LockConfigError(field, `must hold at most ${MAX_KEYS} keys, got ${list.length}`);
  }
  return [...new Set(list.map((k, i) => validateKey(k, `${field}[${i}]`)))];
}

/** Per-acquisition options after validation (unset fields stay unset, for defaults to fill). */
export interface CheckedLockOptions {
  backend?: string;
  ttl?: number;
  waitTimeout?: number;
  autoRenew?: boolean;
  lockAtLeastFor?: number;
  signal?: AbortSignal;
  maxHold?: number;
  mode?: LockMode;
  permits?: number;
}

const LOCK_OPTION_KEYS: ReadonlySet<string> = new Set([
  'backend',
  'ttl',
  'waitTimeout',
  'autoRenew',
  'lockAtLeastFor',
  'signal',
  'maxHold',
  'mode',
  'permits',
]);

/**
 * Validates the shape of `LockOptions` (unknown keys are refused so a typo such as `timeout`
 * is not silently ignored). The backend name is checked later, against the configured ones.
 */
export function validateLockOptions(options: unknown): CheckedLockOptions {
  if (options === undefined) return {};
  const o = checkOptions(options, LOCK_OPTION_KEYS, 'options');
  const checked: CheckedLockOptions = {
    backend: o.backend === undefined ? undefined : checkBackendName(o.backend, 'backend'),
    ttl: o.ttl === undefined ? undefined : checkTtl(o.ttl, 'ttl'),
    waitTimeout: o.waitTimeout === undefined ? undefined : checkWait(o.waitTimeout, 'waitTimeout'),
    autoRenew: o.autoRenew === undefined ? undefined : checkBoolean(o.autoRenew, 'autoRenew'),
    lockAtLeastFor:
      o.lockAtLeastFor === undefined
        ? undefined
        : checkNonNegativeDuration(o.lockAtLeastFor, 'lockAtLeastFor'),
    signal: o.signal === undefined ? undefined : checkSignal(o.signal, 'signal'),
    maxHold: o.maxHold === undefined ? undefined : checkDuration(o.maxHold, 'maxHold'),
    mode: o.mode === undefined ? undefined : checkMode(o.mode, 'mode'),
    permits: o.permits === undefined ? undefined : checkPermits(o.permits, 'permits'),
  };
  if (checked.mode === 'shared' && checked.permits !== undefined && checked.permits > 1) {
    // A shared lock already admits any number of readers, and "N readers at most" is a counted
    // lock (`permits` with the default mode): the pair has no meaning of its own.
    throw new LockConfigError(
      'permits',
      `must be 1 with mode 'shared' (got ${checked.permits}): a shared lock admits any number ` +
        "of readers; for at most N holders use permits with mode 'exclusive' (the default)",
    );
  }
  return checked;
}

/** `'exclusive'` or `'shared'`. */
export function checkMode(value: unknown, field: string): LockMode {
  if (value !== 'exclusive' && value !== 'shared') {
    throw new LockConfigError(field, `must be 'exclusive' or 'shared', got ${describe(value)}`);
  }
  return value;
}

/** A whole number of permits, 1 to {@link MAX_PERMITS}. */
export function checkPermits(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new LockConfigError(field, `must be a whole number, got ${describe(value)}`);
  }
  if (value < 1 || value > MAX_PERMITS) {
    throw new LockConfigError(field, `must be from 1 to ${MAX_PERMITS}, got ${value}`);
  }
  return value;
}
