/**
 * The property for `@Locked` calls, one input at a time: the method runs once, under a lock on
 * exactly the key the template or key function gives (busy to anyone else meanwhile, free
 * after), or it never runs and the call is refused with a `LockConfigError` that names the
 * method, before any store call. An error thrown by the caller's own key function is rethrown
 * as it is.
 */
import { expect } from '@jest/globals';
import { LockAbortedError } from '../../lib/errors/lock.errors';
import type { Lock } from '../../lib/lock.interfaces';
import { settle, within } from '../support/async';
import {
  checkHeld,
  checkReleased,
  expectOverCapacity,
  expectRefused,
  type Outcome,
  type PropertyTarget,
} from './call-checks';
import { distinctKeys, keysFaults, templateKey } from './expected';
import { Gate, KeyFunctionFailure, type LockedJobs } from './locked-jobs';

/** What a `@Locked` call must do: lock `keys`, be refused naming a fault, or fail otherwise. */
export type LockedExpectation =
  | { readonly keys: readonly string[] }
  | { readonly faults: readonly string[] }
  | { readonly throws: Error }
  | { readonly aborted: true };

/**
 * Runs `call` (a `@Locked` method of `Class.method` = `where`, given `gate`) and checks the
 * outcome against `expected` (a lock with `lockAtLeastFor` frees its key that much later).
 */
export async function checkLockedCall(
  t: PropertyTarget,
  where: string,
  call: (gate: Gate) => Promise<string>,
  expected: LockedExpectation,
  lockAtLeastFor = 0,
): Promise<Outcome> {
  const method = `@Locked ${where}`;
  const gate = new Gate();
  const before = t.calls.total();
  let running: Promise<string>;
  try {
    running = call(gate);
  } catch (err) {
    throw new Error(`${method} threw synchronously: ${String(err)}`);
  }
  const first = await settle(
    within(Promise.race([gate.inside.promise, running]), t.callMs, method),
  );
  const overCapacity = 'keys' in expected && expected.keys.length > t.capacity;
  if ('throws' in expected || 'faults' in expected || 'aborted' in expected || overCapacity) {
    try {
      if (overCapacity) {
        expectOverCapacity(first);
      } else if ('throws' in expected) {
        expect(first).toEqual({ ok: false, error: expected.throws });
        expect(t.calls.total() - before).toBe(0);
      } else if ('aborted' in expected) {
        expect(first.ok ? first.value : first.error).toBeInstanceOf(LockAbortedError);
        expect(t.calls.total() - before).toBe(0);
      } else if ('faults' in expected) {
        const error = expectRefused(t, first, expected.faults, before);
        expect(error.where).toBe(`@Locked on ${where}`);
      }
      expect(gate.runs).toBe(0);
    } finally {
      // A method that ran where it must not have must not keep its lock for the next input.
      gate.proceed.resolve();
      await running.catch(() => undefined);
    }
    if (overCapacity) return 'over capacity';
    return 'throws' in expected ? 'own error' : 'aborted' in expected ? 'aborted' : 'refused';
  }
  if (!first.ok)
    throw new Error(`${method} failed on a valid key: ${String(first.error)}`, {
      cause: first.error,
    });
  const lock = first.value as Lock | undefined;
  if (!lock) throw new Error(`${method} ran with no current lock`);
  try {
    await checkHeld(t, lock, expected.keys);
  } finally {
    gate.proceed.resolve();
  }
  expect(await within(running, t.callMs, method)).toBe('ran');
  expect(gate.runs).toBe(1);
  await checkReleased(t, lock, expected.keys, lockAtLeastFor);
  return 'worked';
}

/** `@Locked('k:{0}:{1.a}')` called with `(a, b)`. */
export function checkTemplated(t: PropertyTarget, jobs: LockedJobs, a: unknown, b: unknown) {
  const key = templateKey(a, b);
  return checkLockedCall(
    t,
    'LockedJobs.templated',
    (gate) => jobs.templated(a, b, gate),
    key === undefined ? { faults: ['key'] } : { keys: [key] },
  );
}

/** `@Locked(keys => keys)` called with `keys` (a `KeyFunctionFailure` makes it throw). */
export function checkByFunction(t: PropertyTarget, jobs: LockedJobs, keys: unknown) {
  const expected =
    keys instanceof KeyFunctionFailure
      ? { throws: keys.error }
      : typeof keys !== 'string' &&
          !(Array.isArray(keys) && keys.every((k) => typeof k === 'string'))
        ? { faults: ['key'] }
        : keysFaults(keys).length > 0
          ? { faults: keysFaults(keys) }
          : { keys: distinctKeys(keys) };
  return checkLockedCall(
    t,
    'LockedJobs.byFunction',
    (gate) => jobs.byFunction(keys, gate),
    expected,
  );
}
