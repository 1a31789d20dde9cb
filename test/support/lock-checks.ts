/**
 * Checks shared by the conformance battery and the core specs: event recording, backend call
 * counting (proof that something made no store call) and the shape of the library's errors.
 */
import { expect } from '@jest/globals';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { LockLostError, LockNotAcquiredError } from '../../lib/errors/lock.errors';
import type { LockEvent, LockEventName } from '../../lib/lock.interfaces';
import type { LockService } from '../../lib/lock.service';
import { within, deferred, sleep } from './async';

/** Records the events of the given names until `stop()`. */
export function recordEvents(locks: LockService, names: readonly LockEventName[]) {
  const events: LockEvent[] = [];
  const offs = names.map((name) => locks.on(name, (e) => events.push(e)));
  return {
    events,
    of(type: LockEventName, key: string): LockEvent[] {
      return events.filter((e) => e.type === type && e.key === key);
    },
    stop(): void {
      for (const off of offs) off();
    },
  };
}

/** Resolves with the first event of `name` matching `match`, within `ms`. */
export async function nextEvent(
  locks: LockService,
  name: LockEventName,
  match: (e: LockEvent) => boolean,
  ms: number,
): Promise<LockEvent> {
  const got = deferred<LockEvent>();
  const off = locks.on(name, (e) => {
    if (match(e)) got.resolve(e);
  });
  try {
    return await within(got.promise, ms, `a '${name}' event`);
  } finally {
    off();
  }
}

const BACKEND_METHODS = [
  'tryAcquire',
  'acquire',
  'extend',
  'release',
  'isLocked',
  'inspect',
  'forceRelease',
] as const;
type BackendMethod = (typeof BACKEND_METHODS)[number];

/** Wraps the raw backend's methods with call counters; `restore()` puts the originals back. */
export function countBackendCalls(backend: LockBackend) {
  const target = backend as unknown as Record<string, unknown>;
  const counts = Object.fromEntries(BACKEND_METHODS.map((m) => [m, 0])) as Record<
    BackendMethod,
    number
  >;
  const restores: Array<() => void> = [];
  for (const method of BACKEND_METHODS) {
    const original = target[method];
    if (typeof original !== 'function') continue;
    const own = Object.prototype.hasOwnProperty.call(target, method);
    const fn = original as (...args: unknown[]) => unknown;
    target[method] = function counted(this: unknown, ...args: unknown[]): unknown {
      counts[method] += 1;
      return fn.apply(this, args);
    };
    restores.push(() => {
      if (own) target[method] = original;
      else delete target[method];
    });
  }
  return {
    counts,
    total: (): number => BACKEND_METHODS.reduce((sum, m) => sum + counts[m], 0),
    restore(): void {
      for (const restore of restores.reverse()) restore();
    },
  };
}

/** `reason` is the `LockLostError` of `key` on `backend`. */
export function expectLockLost(reason: unknown, key: string, backend: string): void {
  expect(reason).toBeInstanceOf(LockLostError);
  const err = reason as LockLostError;
  expect(err.code).toBe('LOCK_LOST');
  expect(err.key).toBe(key);
  expect(err.backend).toBe(backend);
}

/** `reason` is the `LockNotAcquiredError` of `key` on `backend`, with a waited time. */
export function expectNotAcquired(
  reason: unknown,
  key: string,
  backend: string,
): LockNotAcquiredError {
  expect(reason).toBeInstanceOf(LockNotAcquiredError);
  const err = reason as LockNotAcquiredError;
  expect(err.code).toBe('LOCK_NOT_ACQUIRED');
  expect(err.key).toBe(key);
  expect(err.backend).toBe(backend);
  expect(typeof err.waitedMs).toBe('number');
  expect(err.waitedMs).toBeGreaterThanOrEqual(0);
  return err;
}

/** Waits until `locks.inspect` counts `n` callers queued on `key`; rejects after `ms`. */
export function queuedOn(locks: LockService, key: string, n: number, ms: number): Promise<void> {
  return within(
    (async () => {
      while (((await locks.inspect(key)).waiting ?? 0) < n) await sleep(10);
    })(),
    ms,
    `${n} caller(s) queued on ${key}`,
  );
}
