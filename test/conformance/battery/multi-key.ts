import { describe, expect, it } from '@jest/globals';
import { settle, sleep, within } from '../../support/async';
import type { LockFixture } from './fixture';

/**
 * Several keys in one lock, as the store sees them: every key really taken (each with its own
 * fence), all or none (a partial grant is given back to the store), and no deadlock between
 * opposite orders while the store makes waiters wait. Canonical order and de-duplication are the
 * engine's (test/core/multi-key.spec.ts).
 */
export function multiKey(f: LockFixture): void {
  describe('multi-key', () => {
    const pair = (): [string, string] => {
      const base = f.newKey('mk');
      return [`${base}-a`, `${base}-b`];
    };

    it('takes every key on the store, each with its own fence, and frees them all on release', async () => {
      const [ka, kb] = pair();
      const lock = await f.acquire([kb, ka]);
      expect(lock.fences).toHaveLength(2);
      for (const fence of lock.fences) expect(Number.isSafeInteger(fence)).toBe(true);
      expect(lock.fence).toBe(lock.fences[0]);
      for (const key of [ka, kb]) {
        expect(await f.backend.isLocked(f.full(key))).toBe(true);
        expect(await f.tryAcquire(key)).toBeNull();
      }
      await lock.release();
      await f.expectLocked(ka, false);
      await f.expectLocked(kb, false);
    });

    it('all or none: a busy key rolls back the keys already granted', async () => {
      const [ka, kb] = pair();
      const holder = await f.acquire(kb);
      expect(await f.tryAcquire([kb, ka])).toBeNull();
      await f.expectLocked(ka, false);
      const r0 = await settle(f.acquire([kb, ka], { waitTimeout: 0 }));
      expect(r0.ok).toBe(false);
      if (!r0.ok) f.expectNotAcquired(r0.error, kb);
      await f.expectLocked(ka, false);
      // timing out after a partial grant (ka sorts first) must give ka back too
      const r1 = await settle(f.acquire([ka, kb], { waitTimeout: 200 }));
      expect(r1.ok).toBe(false);
      await f.expectLocked(ka, false);
      const other = await f.tryAcquire(ka);
      expect(other).not.toBeNull();
      await other?.release();
      expect(holder.isHeld()).toBe(true);
      // and once the busy key frees up, a waiter gets both
      const waiter = f.acquire([kb, ka], { waitTimeout: 10_000 });
      await holder.release();
      const both = await within(waiter, 10_000, 'the multi-key waiter');
      expect(both.keys).toEqual([ka, kb]);
      await both.release();
      await f.expectLocked(ka, false);
      await f.expectLocked(kb, false);
    });

    it('opposite key orders from concurrent clients do not deadlock', async () => {
      const [ka, kb] = pair();
      let inside = 0;
      let maxInside = 0;
      await Promise.all(
        Array.from({ length: 4 }, async (_, i) => {
          for (let round = 0; round < 3; round++) {
            const keys = (i + round) % 2 === 0 ? [ka, kb] : [kb, ka];
            await f.locks.withLock(
              keys,
              async () => {
                inside += 1;
                maxInside = Math.max(maxInside, inside);
                await sleep(1);
                inside -= 1;
              },
              { waitTimeout: 20_000 },
            );
          }
        }),
      );
      expect(maxInside).toBe(1);
      await f.expectLocked(ka, false);
      await f.expectLocked(kb, false);
    }, 60_000);
  });
}
