import { describe, expect, it } from '@jest/globals';
import type { Lock } from '../../lib/lock.interfaces';
import { settle, sleep } from '../support/async';
import { memoryApp } from './memory-app';

// Scopes are the engine's: `await using`, `current()` per async context, and `withLock`.
describe('scopes', () => {
  const f = memoryApp();

  it('`await using` releases the lock at scope end, also when the scope throws', async () => {
    const key = f.newKey('using');
    let seen: Lock | undefined;
    {
      await using lock = await f.locks.acquire(key);
      seen = lock;
      await f.expectLocked(key, true);
    }
    expect(seen.isHeld()).toBe(false);
    await f.expectLocked(key, false);

    const boom = new Error('boom');
    const thrown = await settle(
      (async () => {
        await using lock = await f.locks.acquire(key);
        seen = lock;
        throw boom;
      })(),
    );
    expect(thrown.ok ? undefined : thrown.error).toBe(boom);
    expect(seen.isHeld()).toBe(false);
    await f.expectLocked(key, false);
  });

  it('current() is the innermost withLock lock, per async context, undefined outside', async () => {
    const { locks } = f;
    const [k1, k2, k3] = [f.newKey('cur1'), f.newKey('cur2'), f.newKey('cur3')];
    expect(locks.current()).toBeUndefined();
    await locks.withLock(k1, async (l1) => {
      expect(locks.current()).toBe(l1);
      await locks.withLock(k2, async (l2) => {
        expect(locks.current()).toBe(l2);
        await sleep(1);
        expect(locks.current()).toBe(l2);
      });
      expect(locks.current()).toBe(l1);
      // a lock released early inside its own scope is no longer current
      await locks.withLock(k2, async (l2) => {
        await l2.release();
        expect(locks.current()).toBe(l1);
      });
    });
    expect(locks.current()).toBeUndefined();
    // a bare acquire() does not enter the context
    const bare = await f.acquire(k3);
    expect(locks.current()).toBeUndefined();
    await bare.release();
    // concurrent scopes each see their own lock across awaits
    await Promise.all(
      [k1, k2].map((k) =>
        locks.withLock(k, async (own) => {
          for (let i = 0; i < 3; i++) {
            await sleep(Math.random() * 3);
            expect(locks.current()).toBe(own);
          }
        }),
      ),
    );
    expect(locks.current()).toBeUndefined();
  });

  it('withLock returns the value, rethrows the same error object and always releases', async () => {
    const key = f.newKey('with');
    let seen: Lock | undefined;
    const value = await f.locks.withLock(key, (lock) => {
      seen = lock;
      return 42;
    });
    expect(value).toBe(42);
    expect(seen?.isHeld()).toBe(false);
    expect(seen?.signal.aborted).toBe(true);
    await f.expectLocked(key, false);

    class DomainError extends Error {}
    const sync = new Error('sync boom');
    const rejected = new DomainError('async boom');
    const notAnError = { reason: 'plain object' };
    const bodies: Array<[unknown, () => unknown]> = [
      [
        sync,
        () => {
          throw sync;
        },
      ],
      [
        rejected,
        async () => {
          await sleep(1);
          throw rejected;
        },
      ],
      [
        notAnError,
        async () => {
          throw notAnError;
        },
      ],
    ];
    for (const [thrown, body] of bodies) {
      const r = await settle(f.locks.withLock(key, body));
      expect(r.ok ? undefined : r.error).toBe(thrown);
      await f.expectLocked(key, false);
    }
    const after = await f.tryAcquire(key);
    expect(after).not.toBeNull();
    await after?.release();
  });
});
