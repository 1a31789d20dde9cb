import { LockConfigError } from '../../errors/lock.errors';
import { MAX_TIMER_MS } from './timers';

/**
 * Option-shape checks shared by the engine and every backend factory. Each throws
 * `LockConfigError` naming `field`, so a bad option fails at bootstrap (or at the call) before
 * any I/O, and says which option it was.
 */

/** A plain object (options bags). */
export function checkObject(value: unknown, field: string): Record<string, unknown> {
  // A revoked proxy throws even from Array.isArray.
  if (
    typeof value !== 'object' ||
    value === null ||
    readOption(field, () => Array.isArray(value))
  ) {
    throw new LockConfigError(field, `must be an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

/**
 * An options object (checked under `field`) with only `known` keys: a typo such as `timeout`
 * for `waitTimeout` is refused instead of silently ignored. An unknown key is named
 * `keyPrefix + key` (default `field.key`); `what` says whose option it is not. Returns the
 * known options read once, here (own or inherited, as property access reads them): a getter
 * or proxy trap that throws is a refusal naming the option, not a stray error, and what is
 * validated next is what was read, not a second read that could differ.
 */
export function checkOptions(
  value: unknown,
  known: ReadonlySet<string>,
  field: string,
  keyPrefix = `${field}.`,
  what = 'unknown option',
): Record<string, unknown> {
  const object = checkObject(value, field);
  for (const name of readOption(field, () => Object.keys(object))) {
    if (!known.has(name)) throw new LockConfigError(`${keyPrefix}${name}`, what);
  }
  const read = Object.create(null) as Record<string, unknown>;
  for (const name of known) {
    // Inline rather than through readOption: this runs for every option of every call, and a
    // closure plus the field's name built per option were most of its cost.
    let option: unknown;
    try {
      option = object[name];
    } catch (err) {
      throw unreadable(`${keyPrefix}${name}`, err);
    }
    if (option !== undefined) read[name] = option;
  }
  return read;
}

/**
 * An options object copied by its own enumerable fields, each read once: what `{ ...value }`
 * does, without its traps. A getter (or proxy trap) that throws is a `LockConfigError` naming
 * the field; so is an own `__proto__` field (as `JSON.parse` makes), which a copy by
 * assignment, as Nest's module builder makes, would turn into the copy's prototype, lending it
 * fields nobody validated. For callers that copy options before validating them (`@Locked`,
 * `LockModule.forRoot`); fields are named `keyPrefix + name`.
 */
export function copyOwnOptions(
  value: unknown,
  field: string,
  keyPrefix = `${field}.`,
): Record<string, unknown> {
  const object = checkObject(value, field);
  const copy: Record<string, unknown> = {};
  for (const name of readOption(field, () => Object.keys(object))) {
    if (name === '__proto__') throw new LockConfigError(`${keyPrefix}${name}`, 'unknown option');
    copy[name] = readOption(`${keyPrefix}${name}`, () => object[name]);
  }
  return copy;
}

/**
 * Runs `read` (a property read, `Object.keys`, ...) of a value the caller gave; what it throws
 * (a getter's or a proxy's error) becomes a `LockConfigError` naming `field`. Only the error's
 * class is quoted: its message is the caller's and could hold anything.
 */
export function readOption<T>(field: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw unreadable(field, err);
  }
}

/** The refusal of a value whose read threw `err` (only the error's class is quoted). */
function unreadable(field: string, err: unknown): LockConfigError {
  const thrown = err instanceof Error ? err.name : typeof err;
  return new LockConfigError(field, `could not be read: reading it threw ${thrown}`);
}

/**
 * A positive, finite duration in ms (ttl, timeouts): `0`, negatives, NaN and Infinity are
 * refused; fractions are rounded up to whole ms.
 */
export function checkDuration(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isFinite(value)) throw new LockConfigError(field, 'must be finite');
  if (value <= 0) throw new LockConfigError(field, `must be > 0, got ${value}`);
  if (value > MAX_TIMER_MS) throw new LockConfigError(field, `must be at most ${MAX_TIMER_MS} ms`);
  return Math.ceil(value);
}

/** A wait in ms: `0` = one try, `Infinity` = forever; negatives and NaN are refused. */
export function checkWait(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (value < 0) throw new LockConfigError(field, `must be >= 0, got ${value}`);
  return value;
}

/** A finite, non-negative duration in ms (lockAtLeastFor). */
export function checkNonNegativeDuration(value: unknown, field: string): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new LockConfigError(field, `must be a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isFinite(value)) throw new LockConfigError(field, 'must be finite');
  if (value < 0) throw new LockConfigError(field, `must be >= 0, got ${value}`);
  if (value > MAX_TIMER_MS) throw new LockConfigError(field, `must be at most ${MAX_TIMER_MS} ms`);
  return value;
}

/** A boolean option. */
export function checkBoolean(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') {
    throw new LockConfigError(field, `must be true or false, got ${describe(value)}`);
  }
  return value;
}

/**
 * Exactly one of `names` is set in `config` (`url`, `clusterNodes` or `client`, say); returns
 * the one that is.
 */
export function checkExactlyOne<K extends string>(
  config: Partial<Record<K, unknown>>,
  names: readonly K[],
  field: string,
): K {
  const given = names.filter(
    (name) => readOption(`${field}.${name}`, () => config[name]) !== undefined,
  );
  if (given.length !== 1) {
    const list = `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
    throw new LockConfigError(field, `set exactly one of ${list}`);
  }
  return given[0];
}

/** Short description of a bad value for error messages (never dumps whole objects). */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `"${value.length > 40 ? value.slice(0, 40) + '…' : value}"`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}`;
  }
  if (typeof value === 'object' && isArray(value)) return 'an array';
  return typeof value;
}

/** `Array.isArray`, false for a revoked proxy (which throws from it). */
function isArray(value: object): boolean {
  try {
    return Array.isArray(value);
  } catch {
    return false;
  }
}
