import { describe, expect, it, jest } from '@jest/globals';
import { LockConfigError, LockLostError } from '../../lib/errors/lock.errors';
import type { Lock, LockOptions } from '../../lib/lock.interfaces';
import {
  aborted,
  deferred,
  settle,
  sleep,
  stillPendingAfter,
  within,
  type Settled,
} from '../support/async';
import { countBackendCalls } from '../support/lock-checks';
import { memoryApp } from './memory-app';

/** Resolves once `scope` reached `checkpoint`; fails if the scope ended first. */
function reached(checkpoint: Promise<void>, scope: Promise<unknown>): Promise<unknown> {
  return Promise.race([
    checkpoint,
    scope.then(() => {
      throw new Error('scope ended before reaching its checkpoint');
    }),
  ]);
}

// Reentrancy is the engine's: a re-entry never reaches the store, so one backend shows it all.
describe('reentrancy', () => {
  const f = memoryApp();

  it('re-acquiring inside withLock re-enters without a backend call; outermost release frees', async () => {
    const key = f.newKey('reenter');
    const inScope = deferred();
    const leave = deferred();
    const reentered0 = f.metrics().lock_reentered_total;
    const scope = f.locks.withLock(key, async (outer) => {
      const spy = countBackendCalls(f.backend);
      let inner: Lock;
      try {
        inner = await f.locks.acquire(key, { waitTimeout: 0 });
        expect(spy.counts.tryAcquire + spy.counts.acquire).toBe(0);
        expect(inner.token).toBe(outer.token);
        expect(inner.fence).toBe(outer.fence);
        await inner.release();
        expect(spy.counts.release).toBe(0);
      } finally {
        spy.restore();
      }
      expect(outer.isHeld()).toBe(true);
      await f.expectLocked(key, true);
      inScope.resolve();
      await leave.promise;
      return outer;
    });
    await reached(inScope.promise, scope);
    // The test body is another async context: it must not share the lock.
    expect(await f.tryAcquire(key)).toBeNull();
    expect(f.metrics().lock_reentered_total).toBe(reentered0 + 1);
    leave.resolve();
    const outer = await scope;
    expect(outer.isHeld()).toBe(false);
    await f.expectLocked(key, false);
  });

  it('nested withLock on the same key re-enters; three levels release in order', async () => {
    const key = f.newKey('nest');
    const { locks } = f;
    const result = await locks.withLock(key, async (l1) =>
      locks
        .withLock(key, async (l2) => {
          expect(l2.token).toBe(l1.token);
          expect(locks.current()?.token).toBe(l1.token);
          const l3 = await locks.acquire(key, { waitTimeout: 0 });
          expect(l3.token).toBe(l1.token);
          await l3.release();
          expect(l1.isHeld()).toBe(true);
          return 'nested';
        })
        .then(async (value) => {
          expect(l1.isHeld()).toBe(true);
          await f.expectLocked(key, true);
          return value;
        }),
    );
    expect(result).toBe('nested');
    await f.expectLocked(key, false);
  });

  it('two bare acquire() calls of one key contend (no re-entry outside withLock)', async () => {
    const key = f.newKey('bare');
    const a = await f.acquire(key);
    expect(await f.tryAcquire(key)).toBeNull();
    const r = await settle(f.acquire(key, { waitTimeout: 0 }));
    expect(r.ok).toBe(false);
    if (!r.ok) f.expectNotAcquired(r.error, key);
    expect(f.locks.current()).toBeUndefined();
    await a.release();
  });

  it('independent withLock calls started outside any lock do not share it', async () => {
    const key = f.newKey('siblings');
    let inside = 0;
    let maxInside = 0;
    let counter = 0;
    const tokens = new Set<string>();
    const section = async (lock: Lock): Promise<void> => {
      inside += 1;
      maxInside = Math.max(maxInside, inside);
      tokens.add(lock.token);
      const read = counter;
      await new Promise((resolve) => setImmediate(resolve));
      await sleep(1);
      counter = read + 1;
      inside -= 1;
    };
    // 8 calls started in the same tick
    await Promise.all(
      Array.from({ length: 8 }, () => f.locks.withLock(key, section, { waitTimeout: 20_000 })),
    );
    expect(maxInside).toBe(1);
    expect(counter).toBe(8);
    expect(tokens.size).toBe(8);

    // latecomers started (outside any scope) while another call is inside its scope
    const inScope = deferred();
    const leave = deferred();
    let latecomersRan = 0;
    const first = f.locks.withLock(key, async (lock) => {
      inScope.resolve();
      await leave.promise;
      return lock.token;
    });
    await reached(inScope.promise, first);
    const latecomers = Array.from({ length: 3 }, () =>
      f.locks.withLock(
        key,
        async (lock) => {
          latecomersRan += 1;
          await section(lock);
          return lock.token;
        },
        { waitTimeout: 20_000 },
      ),
    );
    expect(await stillPendingAfter(Promise.race(latecomers), 50)).toBe(true);
    expect(latecomersRan).toBe(0);
    leave.resolve();
    const firstToken = await first;
    const lateTokens = await Promise.all(latecomers);
    expect(new Set([firstToken, ...lateTokens]).size).toBe(4);
    expect(maxInside).toBe(1);
    expect(counter).toBe(11);
  });

  it('re-entering a lock that was lost rejects LockLostError', async () => {
    const key = f.newKey('reenter-lost');
    let reentry: Settled<Lock> | undefined;
    let nested: Settled<unknown> | undefined;
    const nestedFn = jest.fn(async () => 'ran');
    const outcome = await settle(
      f.locks.withLock(
        key,
        async (outer) => {
          expect(await f.backend.release(f.full(key), outer.token)).toBe(true);
          await within(aborted(outer.signal), f.ttl * 3 + 5_000, 'the lost signal');
          reentry = await settle(f.locks.acquire(key, { waitTimeout: 0 }));
          if (reentry.ok) f.track(reentry.value);
          nested = await settle(f.locks.withLock(key, nestedFn, { waitTimeout: 0 }));
        },
        { ttl: f.ttl },
      ),
    );
    // whether withLock itself reports the loss is up to the core; the scope must have run
    if (!outcome.ok && !(outcome.error instanceof LockLostError)) throw outcome.error;
    expect(reentry?.ok).toBe(false);
    if (reentry && !reentry.ok) f.expectLockLost(reentry.error, key);
    expect(nested?.ok).toBe(false);
    if (nested && !nested.ok) expect(nested.error).toBeInstanceOf(LockLostError);
    expect(nestedFn).not.toHaveBeenCalled();
  });

  describe('of shared and counted locks', () => {
    /** Runs `inner` inside a scope holding `key` with `outer`, counting the store calls it makes. */
    async function inside<T>(
      key: string,
      outer: LockOptions,
      inner: (lock: Lock) => Promise<T>,
    ): Promise<{ value: T; storeCalls: number }> {
      return f.locks.withLock(
        key,
        async (lock) => {
          const spy = countBackendCalls(f.backend);
          try {
            const value = await inner(lock);
            return { value, storeCalls: spy.counts.tryAcquire + spy.counts.acquire };
          } finally {
            spy.restore();
          }
        },
        outer,
      );
    }

    it('an exclusive holder re-enters with shared or a counted request, holding what it held', async () => {
      const key = f.newKey('x-then-s');
      const { value, storeCalls } = await inside(key, {}, async (outer) => {
        const reader = await f.locks.acquire(key, { mode: 'shared', waitTimeout: 0 });
        const slot = await f.locks.acquire(key, { permits: 3, waitTimeout: 0 });
        const nested = await f.locks.withLock(key, (l) => l.mode, { mode: 'shared' });
        expect([reader.token, slot.token]).toEqual([outer.token, outer.token]);
        await reader.release();
        await slot.release();
        expect(outer.isHeld()).toBe(true);
        return [reader.mode, slot.permit, nested];
      });
      expect(value).toEqual(['exclusive', 0, 'exclusive']);
      expect(storeCalls).toBe(0);
      await f.expectLocked(key, false);
    });

    it('a shared holder re-enters with shared; asking exclusive is refused at once, not deadlocked', async () => {
      const key = f.newKey('s-then-x');
      const other = f.newKey('s-then-x-other');
      const ran = jest.fn(async () => 'ran');
      const { value, storeCalls } = await inside(key, { mode: 'shared' }, async (outer) => {
        const again = await f.locks.acquire(key, { mode: 'shared', waitTimeout: 0 });
        expect(again).toMatchObject({ token: outer.token, mode: 'shared' });
        await again.release();
        const outcomes = [
          await settle(f.locks.acquire(key, { waitTimeout: 60_000 })),
          await settle(f.locks.tryAcquire(key, { mode: 'exclusive' })),
          await settle(f.locks.withLock(key, ran, { waitTimeout: 60_000 })),
          // A multi-key request is refused before it takes any of its keys.
          await settle(f.locks.acquire([other, key], { waitTimeout: 60_000 })),
        ];
        expect(outer.isHeld()).toBe(true);
        return outcomes;
      });
      for (const outcome of value) {
        expect(outcome.ok).toBe(false);
        const error = (outcome as { error: unknown }).error;
        expect(error).toBeInstanceOf(LockConfigError);
        expect(error).toMatchObject({ field: 'mode' });
        expect((error as Error).message).toMatch(/no upgrade/);
      }
      expect(ran).not.toHaveBeenCalled();
      expect(storeCalls).toBe(0);
      await f.expectLocked(key, false);
      await f.expectLocked(other, false);
    });

    it('a counted holder re-enters its own slot; another count or a mutex is refused', async () => {
      const key = f.newKey('slot');
      const taken = await f.acquire(key, { permits: 3 }); // another holder, slot 0
      const { value, storeCalls } = await inside(key, { permits: 3 }, async (outer) => {
        expect(outer.permit).toBe(1);
        const again = await f.locks.acquire(key, { permits: 3, waitTimeout: 0 });
        const permit = again.permit;
        await again.release();
        const refused = [
          await settle(f.locks.acquire(key, { waitTimeout: 0 })),
          await settle(f.locks.acquire(key, { permits: 2, waitTimeout: 0 })),
          await settle(f.locks.acquire(key, { mode: 'shared', waitTimeout: 0 })),
        ];
        return { permit, refused };
      });
      expect(value.permit).toBe(1);
      for (const outcome of value.refused) {
        expect(outcome.ok).toBe(false);
        expect((outcome as { error: unknown }).error).toMatchObject({
          code: 'LOCK_CONFIG',
          field: expect.stringMatching(/permits|mode/),
        });
      }
      expect(storeCalls).toBe(0);
      await taken.release();
      await f.expectLocked(key, false);
    });
  });
});
