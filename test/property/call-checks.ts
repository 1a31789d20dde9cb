/**
 * The property every public call must keep, checked for one input at a time: the input works
 * (the lock is taken, the key is busy for anyone else and every other key stays free, and after
 * the release nothing is left: the key is free, no lease is counted as held), or it is refused
 * with a `LockConfigError` naming one of the fields at fault before any store call. Every call is
 * bounded in time, and anything else (another error, a synchronous throw, a hang) fails it.
 */
import { randomUUID } from 'node:crypto';
import { expect } from '@jest/globals';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { LockAbortedError, LockBackendError, LockConfigError } from '../../lib/errors/lock.errors';
import type { Lock, LockInfo } from '../../lib/lock.interfaces';
import type { LockService } from '../../lib/lock.service';
import { deferred, settle, sleep, within, type Settled } from '../support/async';
import type { countBackendCalls } from '../support/lock-checks';
import { distinctKeys, keyFault, keysFaults } from './expected';
import { fixedOptions, type OptionsCase } from './option-inputs';

/** The app a property runs against. */
export interface PropertyTarget {
  readonly locks: LockService;
  readonly backend: LockBackend;
  /** The backend's name in the app's module options. */
  readonly name: string;
  /** Counts the backend's calls (installed once for the target). */
  readonly calls: ReturnType<typeof countBackendCalls>;
  /** Longest any single call may take before it counts as a hang. */
  readonly callMs: number;
  /**
   * Most locks the backend holds at once (session SQL strategies pin a pooled connection per
   * held lock and refuse more with a `LockBackendError` saying so); `Infinity` elsewhere.
   */
  readonly capacity: number;
}

/**
 * How an input ended: it worked, was refused, or (valid) met an aborted signal, the caller's own
 * error, or more keys than the backend can hold at once.
 */
export type Outcome = 'worked' | 'refused' | 'aborted' | 'own error' | 'over capacity';

/** The calls that take a lock. */
export type LockCall = 'acquire' | 'tryAcquire' | 'withLock';
/** The calls that ask about a key. */
export type QueryCall = 'isLocked' | 'inspect' | 'forceRelease';

/** Starts `call`, turning a synchronous throw into a failure of the property. */
function start<T>(t: PropertyTarget, what: string, call: () => Promise<T>): Promise<Settled<T>> {
  let promise: Promise<T>;
  try {
    promise = call();
  } catch (err) {
    throw new Error(`${what} threw synchronously instead of rejecting: ${String(err)}`);
  }
  return settle(within(promise, t.callMs, what));
}

/**
 * `outcome` is a refusal: a `LockConfigError` whose field is one of `faults`, and the store was
 * not called (`callsBefore`: the count before the call).
 */
export function expectRefused(
  t: PropertyTarget,
  outcome: Settled<unknown>,
  faults: readonly string[],
  callsBefore: number,
): LockConfigError {
  if (outcome.ok)
    throw new Error(
      `resolved ${String(outcome.value)}; expected a refusal naming ${faults.join(' or ')}`,
    );
  const error = outcome.error;
  if (!(error instanceof LockConfigError)) {
    throw new Error(
      `rejected with ${String(error)}; expected a LockConfigError naming ${faults.join(' or ')}`,
      {
        cause: error,
      },
    );
  }
  expect(error.code).toBe('LOCK_CONFIG');
  expect(faults).toContain(error.field);
  expect(error.message).toContain(error.field);
  expect(t.calls.total() - callsBefore).toBe(0);
  return error;
}

/** Fields a refusal may name: the key's faults and the options'. */
function faultsOf(keyFaults: readonly string[], options: OptionsCase): string[] {
  return [...keyFaults, ...options.invalid];
}

/**
 * `acquire`/`tryAcquire`/`withLock` with `key` and `options`: refused with the right field
 * before any store call, rejected with `LockAbortedError` for an aborted signal (no store call
 * either), or a lock that holds and then leaves nothing behind. `forceRelease`: also free the
 * first key with `forceRelease` while held (where the backend can).
 */
export async function checkLockCall(
  t: PropertyTarget,
  call: LockCall,
  key: unknown,
  options: OptionsCase,
  forceRelease = false,
): Promise<Outcome> {
  const faults = faultsOf(keysFaults(key), options);
  const before = t.calls.total();
  const ran = { count: 0 };
  const gate = deferred();
  const inside = deferred<Lock>();
  let running: Promise<string> | undefined;
  const what = `${call}(key, options)`;
  const outcome = await start<Lock | null | string>(t, what, () => {
    const opts = options.build() as never;
    if (call === 'acquire') return t.locks.acquire(key as string, opts);
    if (call === 'tryAcquire') return t.locks.tryAcquire(key as string, opts);
    running = t.locks.withLock(
      key as string,
      async (lock) => {
        ran.count++;
        inside.resolve(lock);
        await gate.promise;
        return 'ran';
      },
      opts,
    );
    // The lock once fn runs (fn then waits for the gate), or the call's own refusal.
    return Promise.race([inside.promise, running]);
  });
  // A lock taken where a refusal was due must not stay held for the next input.
  const letGo = async (): Promise<void> => {
    gate.resolve();
    if (running) await running.catch(() => undefined);
    else if (outcome.ok && isLock(outcome.value)) await outcome.value.release();
  };
  if (faults.length > 0) {
    try {
      expectRefused(t, outcome, faults, before);
      expect(ran.count).toBe(0);
    } finally {
      await letGo();
    }
    return 'refused';
  }
  if (options.aborted) {
    try {
      if (outcome.ok || !(outcome.error instanceof LockAbortedError)) {
        throw new Error(
          `${what} with an aborted signal: expected LockAbortedError, got ${describeOutcome(outcome)}`,
        );
      }
      expect(t.calls.total() - before).toBe(0);
      expect(ran.count).toBe(0);
    } finally {
      await letGo();
    }
    return 'aborted';
  }
  const keys = distinctKeys(key);
  if (keys.length > t.capacity) {
    try {
      expectOverCapacity(outcome);
      expect(ran.count).toBe(0);
    } finally {
      await letGo();
    }
    for (const k of keys)
      expect(await within(t.locks.isLocked(k), t.callMs, 'isLocked')).toBe(false);
    return 'over capacity';
  }
  if (!outcome.ok)
    throw new Error(`${what} failed on valid input: ${String(outcome.error)}`, {
      cause: outcome.error,
    });
  const lock = outcome.value;
  if (lock === null || typeof lock !== 'object') {
    throw new Error(`${what} on a free key resolved ${String(lock)}, not a lock`);
  }
  const lockAtLeastFor = Number(options.values.lockAtLeastFor ?? 0);
  let finished = false;
  const finish = async (): Promise<void> => {
    finished = true;
    if (!running) return lock.release();
    gate.resolve();
    expect(await running).toBe('ran');
  };
  try {
    await checkHeld(t, lock, keys, () => options.build());
    if (forceRelease) await checkForceRelease(t, lock, keys[0]);
    await within(finish(), t.callMs, 'the release');
  } finally {
    // A failed check must not leave its lock to the next input (shrinking reruns many), nor
    // to the next property: a lockAtLeastFor keeps it a moment after the release.
    if (!finished) {
      await finish().catch(() => undefined);
      if (lockAtLeastFor > 0) {
        for (const k of keys)
          await eventuallyFree(t, k, lockAtLeastFor + 3_000).catch(() => undefined);
      }
    }
  }
  await checkReleased(t, lock, keys, lockAtLeastFor);
  return 'worked';
}

/** The documented refusal of a backend asked to hold more locks than its pool allows. */
export function expectOverCapacity(outcome: Settled<unknown>): void {
  if (outcome.ok || !(outcome.error instanceof LockBackendError)) {
    throw new Error(
      `more keys than the backend can hold: expected its LockBackendError, got ${describeOutcome(outcome)}`,
    );
  }
  expect(outcome.error.message).toContain('cannot hold more than');
}

function isLock(value: unknown): value is Lock {
  return typeof value === 'object' && value !== null && 'release' in value;
}

function describeOutcome(outcome: Settled<unknown>): string {
  return outcome.ok ? `a value (${String(outcome.value)})` : String(outcome.error);
}

/**
 * `lock` holds exactly `keys`: each reads as locked and busy to another caller; others are free.
 * `contender` (the options of the call under test, built anew) is also tried on a free key and
 * the first held one together: all or none, so it gets neither and leaves the free key free.
 */
export async function checkHeld(
  t: PropertyTarget,
  lock: Lock,
  keys: readonly string[],
  contender?: () => unknown,
): Promise<void> {
  expect(lock.isHeld()).toBe(true);
  expect(lock.backend).toBe(t.name);
  expect([...lock.keys].sort()).toEqual([...keys].sort());
  expect(lock.key).toBe(lock.keys.join(','));
  expect(t.locks.getMetrics()[t.name].lock_held).toBe(keys.length);
  // A busy check and another key each need one more lock of the backend's capacity.
  const spare = t.capacity > keys.length;
  for (const [i, key] of lock.keys.entries()) {
    expect(await within(t.locks.isLocked(key), t.callMs, 'isLocked')).toBe(true);
    // A bare call is another async context: it contends like another process would.
    const other = await settle(
      within(t.locks.tryAcquire(key), t.callMs, 'tryAcquire of a held key'),
    );
    if (!spare) {
      expectOverCapacity(other);
    } else if (!other.ok || other.value !== null) {
      if (other.ok) await other.value?.release();
      throw new Error(
        `key ${JSON.stringify(key)} held, yet a second tryAcquire got ${describeOutcome(other)}`,
      );
    }
    if (t.backend.inspect) {
      const info = await within(t.locks.inspect(key), t.callMs, 'inspect');
      expect(info).toMatchObject({ held: true, mine: true, fence: lock.fences[i] });
    }
  }
  // U+0001 first: the free key comes first in canonical order, so it is taken, then given back.
  const first = `\u0001${randomUUID()}`;
  if (contender && t.capacity >= keys.length + 2) {
    const both = await within(
      t.locks.tryAcquire([first, lock.keys[0]], contender() as never),
      t.callMs,
      'tryAcquire of a free and a held key',
    );
    if (both) {
      await both.release();
      throw new Error('a free and a held key together were granted');
    }
    expect(await within(t.locks.isLocked(first), t.callMs, 'isLocked')).toBe(false);
  }
  const elsewhere = `other-${randomUUID()}`;
  const free = await settle(
    within(t.locks.tryAcquire(elsewhere), t.callMs, 'tryAcquire of another key'),
  );
  if (!spare) return expectOverCapacity(free);
  if (!free.ok || free.value === null) {
    throw new Error(`another key is not free while this lock is held: ${describeOutcome(free)}`);
  }
  await free.value.release();
}

/** `forceRelease` frees a held key: the holder's lock is lost at once and the key is free. */
async function checkForceRelease(t: PropertyTarget, lock: Lock, key: string): Promise<void> {
  if (!t.backend.forceRelease) return;
  expect(await within(t.locks.forceRelease(key), t.callMs, 'forceRelease')).toBe(true);
  expect(lock.isHeld()).toBe(false);
  expect(lock.signal.aborted).toBe(true);
  expect(await within(t.locks.isLocked(key), t.callMs, 'isLocked')).toBe(false);
}

/**
 * After the release: the handle says so, every key is free (after `lockAtLeastFor` when one was
 * set), and the engine counts no held lease.
 */
export async function checkReleased(
  t: PropertyTarget,
  lock: Lock,
  keys: readonly string[],
  lockAtLeastFor = 0,
): Promise<void> {
  expect(lock.isHeld()).toBe(false);
  expect(lock.signal.aborted).toBe(true);
  expect(t.locks.getMetrics()[t.name].lock_held).toBe(0);
  for (const key of keys) {
    if (lockAtLeastFor > 0) {
      await eventuallyFree(t, key, lockAtLeastFor + 3_000);
    } else {
      expect(await within(t.locks.isLocked(key), t.callMs, 'isLocked after release')).toBe(false);
    }
    if (t.backend.inspect) {
      const info: LockInfo = await within(t.locks.inspect(key), t.callMs, 'inspect');
      expect(info).toMatchObject({ held: false, mine: false });
    }
  }
}

async function eventuallyFree(t: PropertyTarget, key: string, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (await t.locks.isLocked(key)) {
    if (performance.now() > deadline)
      throw new Error(`${JSON.stringify(key)} still locked ${ms} ms after release`);
    await sleep(5);
  }
}

/**
 * `isLocked`/`inspect`/`forceRelease` of a key nobody holds: refused with the right field
 * before any store call (a backend without `inspect`/`forceRelease` refuses those by naming
 * `backend`), or the answer "free": `false`, `{ held: false, mine: false }`, `false`.
 */
export async function checkQueryCall(
  t: PropertyTarget,
  call: QueryCall,
  key: unknown,
  options: OptionsCase,
): Promise<Outcome> {
  const fault = keyFault(key);
  const unsupported = call !== 'isLocked' && !t.backend[call];
  const faults = faultsOf(fault === undefined ? [] : [fault], options);
  const before = t.calls.total();
  const outcome = await start<boolean | LockInfo>(t, `${call}(key, options)`, () =>
    t.locks[call](key as string, options.build() as never),
  );
  if (faults.length > 0 || unsupported) {
    expectRefused(t, outcome, unsupported ? [...faults, 'backend'] : faults, before);
    return 'refused';
  }
  if (!outcome.ok)
    throw new Error(`${call} failed on valid input: ${String(outcome.error)}`, {
      cause: outcome.error,
    });
  if (call === 'inspect') expect(outcome.value).toMatchObject({ held: false, mine: false });
  else expect(outcome.value).toBe(false);
  return 'worked';
}

/** Whatever ran, nothing is held now (a safety net between runs). */
export function expectNothingHeld(t: PropertyTarget): void {
  expect(t.locks.getMetrics()[t.name].lock_held).toBe(0);
}

/**
 * `a` and `b` as two keys: each valid one locks; when both are valid and differ, holding one
 * leaves the other free (and both are then held at once); when equal, the second is busy.
 */
export async function checkKeyPair(t: PropertyTarget, a: string, b: string): Promise<Outcome> {
  const none = fixedOptions(undefined);
  const bounded = <T>(promise: Promise<T>, what: string) => within(promise, t.callMs, what);
  if (keyFault(a) !== undefined || keyFault(b) !== undefined) {
    for (const key of [a, b]) await checkLockCall(t, 'tryAcquire', key, none);
    return 'refused';
  }
  const first = await bounded(t.locks.acquire(a), 'acquire');
  try {
    expect(await bounded(t.locks.isLocked(b), 'isLocked')).toBe(a === b);
    const second = await bounded(t.locks.tryAcquire(b), 'tryAcquire');
    if (a === b) {
      await second?.release();
      expect(second).toBeNull();
    } else {
      expect(second).not.toBeNull();
      expect(second!.key).toBe(b);
      expect(await bounded(t.locks.isLocked(a), 'isLocked')).toBe(true);
      await second!.release();
      expect(await bounded(t.locks.isLocked(b), 'isLocked')).toBe(false);
    }
    expect(await bounded(t.locks.isLocked(a), 'isLocked')).toBe(true);
  } finally {
    await first.release();
  }
  expect(await bounded(t.locks.isLocked(a), 'isLocked')).toBe(false);
  return 'worked';
}
