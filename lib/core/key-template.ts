import { LockConfigError } from '../errors/lock.errors';
import { describe } from './validation';

/** A key for `@Locked`: a template such as `'stock:{0}'` / `'order:{0.customer.id}'`, or a function of the arguments. */
export type LockKeySource<A extends unknown[] = unknown[]> =
  string | ((...args: A) => string | string[]);

const PLACEHOLDER = /\{(\d+)((?:\.[A-Za-z_$][\w$]*)*)\}/g;

/**
 * Resolves a `@Locked` key against the call's arguments. Anything that does not resolve to a
 * usable string (undefined, null, object, empty) is a `LockConfigError`: the method must not
 * run under a key like `stock:undefined` that every call would share or none would.
 */
export function resolveLockKey(source: LockKeySource, args: readonly unknown[]): string | string[] {
  if (typeof source === 'function') {
    const out: unknown = source(...args);
    if (typeof out === 'string') return out;
    if (Array.isArray(out) && out.every((k) => typeof k === 'string')) return out as string[];
    throw new LockConfigError(
      'key',
      `the key function returned ${describe(out)}; expected a string or an array of strings`,
    );
  }
  return source.replace(PLACEHOLDER, (_match, index: string, path: string) => {
    let value: unknown = args[Number(index)];
    for (const prop of path ? path.slice(1).split('.') : []) {
      value =
        value === null || value === undefined
          ? undefined
          : (value as Record<string, unknown>)[prop];
    }
    if (typeof value === 'string' && value.length > 0) return value;
    if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'bigint')
      return String(value);
    throw new LockConfigError(
      'key',
      `placeholder {${index}${path}} in "${source}" resolved to ${describe(value)}`,
    );
  });
}
