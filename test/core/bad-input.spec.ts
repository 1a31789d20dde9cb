import { describe, expect, it, jest } from '@jest/globals';
import { MAX_KEY_LENGTH } from '../../lib/core/settings/validation';
import { LockConfigError } from '../../lib/errors/lock.errors';
import type { Lock, LockOptions } from '../../lib/lock.interfaces';
import { settle } from '../support/async';
import { countBackendCalls } from '../support/lock-checks';
import { memoryApp } from './memory-app';

// Bad input is refused by the engine before it reaches any store.
describe('bad input', () => {
  const f = memoryApp();

  it('is rejected with LockConfigError before any backend I/O', async () => {
    const longKey = 'x'.repeat(MAX_KEY_LENGTH + 1);
    const badKeys: Array<[string, unknown, string]> = [
      ["key ''", '', 'key'],
      ['key over MAX_KEY_LENGTH characters', longKey, 'key'],
      ['numeric key', 42, 'key'],
      ['undefined key', undefined, 'key'],
      ['null key', null, 'key'],
      ['object key', { id: 1 }, 'key'],
      ['empty key array', [], 'key'],
      ["key array holding ''", ['ok', ''], 'key'],
      ['key array holding a number', ['ok', 7], 'key'],
    ];
    const badOptions: Array<[string, LockOptions, string]> = [
      ['ttl 0', { ttl: 0 }, 'ttl'],
      ['ttl -1', { ttl: -1 }, 'ttl'],
      ['ttl NaN', { ttl: NaN }, 'ttl'],
      ['ttl Infinity', { ttl: Infinity }, 'ttl'],
      ['waitTimeout -1', { waitTimeout: -1 }, 'waittimeout'],
      ['waitTimeout NaN', { waitTimeout: NaN }, 'waittimeout'],
      ["unknown backend 'nope'", { backend: 'nope' }, 'backend'],
      ['lockAtLeastFor -1', { lockAtLeastFor: -1 }, 'lockatleastfor'],
      ["mode 'read'", { mode: 'read' } as unknown as LockOptions, 'mode'],
      ['permits 0', { permits: 0 }, 'permits'],
      ['permits 1.5', { permits: 1.5 }, 'permits'],
      ['permits 1025', { permits: 1025 }, 'permits'],
      ["mode 'shared' with permits 2", { mode: 'shared', permits: 2 }, 'permits'],
    ];
    type Call = [string, string, () => Promise<unknown>];
    const fn = jest.fn(async (_lock: Lock) => 'ran');
    const calls: Call[] = [];
    const goodKey = f.newKey('bad-input');
    const { locks } = f;
    for (const [label, key, field] of badKeys) {
      const k = key as string | string[];
      calls.push([`acquire(${label})`, field, () => locks.acquire(k)]);
      calls.push([`tryAcquire(${label})`, field, () => locks.tryAcquire(k)]);
      calls.push([`withLock(${label})`, field, () => locks.withLock(k, fn)]);
      calls.push([`isLocked(${label})`, field, () => locks.isLocked(key as string)]);
    }
    for (const [label, opts, field] of badOptions) {
      calls.push([`acquire(${label})`, field, () => locks.acquire(goodKey, opts)]);
      calls.push([`tryAcquire(${label})`, field, () => locks.tryAcquire(goodKey, opts)]);
      calls.push([`withLock(${label})`, field, () => locks.withLock(goodKey, fn, opts)]);
    }
    calls.push([
      "isLocked(unknown backend 'nope')",
      'backend',
      () => locks.isLocked(goodKey, { backend: 'nope' }),
    ]);

    const failures: string[] = [];
    const spy = countBackendCalls(f.backend);
    try {
      for (const [label, field, call] of calls) {
        const before = spy.total();
        let promise: Promise<unknown>;
        try {
          promise = call();
        } catch (err) {
          failures.push(`${label}: threw synchronously instead of rejecting (${String(err)})`);
          continue;
        }
        const r = await settle(promise);
        if (r.ok) {
          failures.push(`${label}: resolved instead of rejecting`);
          if (r.value && typeof r.value === 'object' && 'release' in r.value) {
            await (r.value as Lock).release();
          }
        } else if (!(r.error instanceof LockConfigError)) {
          failures.push(`${label}: rejected with ${String(r.error)}, not LockConfigError`);
        } else {
          if (r.error.code !== 'LOCK_CONFIG') failures.push(`${label}: code ${r.error.code}`);
          if (typeof r.error.field !== 'string' || !r.error.field.toLowerCase().includes(field)) {
            failures.push(`${label}: field '${String(r.error.field)}' does not name '${field}'`);
          }
        }
        if (spy.total() !== before) {
          failures.push(`${label}: made ${spy.total() - before} backend call(s) first`);
        }
      }
      // positive control: the counters do see the core's backend calls
      await locks.isLocked(goodKey);
      const probe = await locks.tryAcquire(goodKey);
      await probe?.release();
      expect(spy.counts.isLocked).toBeGreaterThanOrEqual(1);
      expect(spy.counts.tryAcquire + spy.counts.acquire).toBeGreaterThanOrEqual(1);
    } finally {
      spy.restore();
    }
    expect(failures).toEqual([]);
    expect(fn).not.toHaveBeenCalled();
    expect(await locks.isLocked(goodKey)).toBe(false);
  });

  it('health() refuses bad options with LockConfigError', async () => {
    await expect(f.locks.health({ timeout: 0 })).rejects.toMatchObject({
      code: 'LOCK_CONFIG',
      field: 'options.timeout',
    });
    await expect(f.locks.health({ backends: ['nope'] })).rejects.toMatchObject({
      code: 'LOCK_CONFIG',
      field: 'backend',
    });
  });
});
