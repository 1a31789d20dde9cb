/**
 * What the documented rules (README, `../shared/design/api.md`) say of an input, written apart
 * from the library's validation so the property test checks the one against the other. Option
 * values carry their verdict from the generator (see `inputs.ts`); keys are judged here,
 * because a random string can break a rule by chance.
 */
import { MAX_KEY_LENGTH, MAX_KEYS } from '../../lib/core/settings/validation';

/** Why a key input is refused (the field the `LockConfigError` must name), or `undefined`. */
export function keyFault(key: unknown, field = 'key'): string | undefined {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) return field;
  // Text every store keeps as it is: UTF-8 holds it unchanged (no lone surrogate), and no NUL.
  if (key.includes('\u0000') || Buffer.from(key, 'utf8').toString('utf8') !== key) return field;
  return undefined;
}

/**
 * The faults of a key or key list for `acquire`/`tryAcquire`/`withLock`: an array must hold 1 to
 * `MAX_KEYS` entries (counted before duplicates are dropped), each a valid key.
 */
export function keysFaults(keys: unknown): string[] {
  if (!Array.isArray(keys)) return listOf(keyFault(keys));
  if (keys.length === 0 || keys.length > MAX_KEYS) return ['key'];
  return keys.flatMap((k, i) => listOf(keyFault(k, `key[${i}]`)));
}

/** The distinct keys a valid key input locks. */
export function distinctKeys(keys: unknown): string[] {
  return [...new Set(Array.isArray(keys) ? (keys as string[]) : [keys as string])];
}

function listOf(fault: string | undefined): string[] {
  return fault === undefined ? [] : [fault];
}

/**
 * One `@Locked('k:{0}:{1.a}')` placeholder: a non-empty string as it is, a finite number or a
 * bigint in decimal; anything else does not resolve.
 */
export function placeholderText(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return value;
  if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'bigint') {
    return String(value);
  }
  return undefined;
}

/** The key `@Locked('k:{0}:{1.a}')` resolves to for `(a, b)`, or `undefined` when it must refuse. */
export function templateKey(a: unknown, b: unknown): string | undefined {
  const first = placeholderText(a);
  const second = placeholderText(b === null || b === undefined ? undefined : readA(b));
  if (first === undefined || second === undefined) return undefined;
  const key = `k:${first}:${second}`;
  return keyFault(key) === undefined ? key : undefined;
}

/** `b.a` as property access reads it (strings, numbers and symbols have properties too). */
function readA(b: unknown): unknown {
  return (b as { a?: unknown }).a;
}
