import { describe, expect, it } from '@jest/globals';
import { LockLostError } from '../../../lib/errors/lock.errors';
import type { Lock } from '../../../lib/lock.interfaces';
import { aborted, within } from '../../support/async';
import { nextEvent } from '../../support/lock-checks';
import { BACKEND, type LockFixture } from './fixture';

/**
 * A lock lost behind its holder's back (deleted on the store): the store refuses the next
 * renewal, and the holder learns it through its signal, a 'lost' event and the metric.
 * Re-entering a lost lock is the engine's (test/core/reentrancy.spec.ts).
 */
export function lostLock(f: LockFixture): void {
  describe('lost lock', () => {
    it('a refused renewal aborts the signal with LockLostError, emits lost, counts the metric', async () => {
      const key = f.newKey('lost');
      const lostBefore = f.metrics().lock_lost_total;
      const a = await f.acquire(key, { ttl: f.ttl });
      await loseBehindItsBack(f, key, a);
      expect(f.metrics().lock_lost_total).toBe(lostBefore + 1);
      await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
      await expect(a.release()).resolves.toBeUndefined();
      const b = await f.tryAcquire(key);
      expect(b).not.toBeNull();
      await b?.release();
    });
  });
}

/**
 * Deletes `lock` (held on `key` with ttl `f.ttl`) on the store behind its holder's back, then
 * checks the holder is told: the watchdog's next renewal (ttl/3) is refused, the signal aborts
 * with LockLostError, `isHeld` turns false and a 'lost' event names this backend.
 */
export async function loseBehindItsBack(f: LockFixture, key: string, lock: Lock): Promise<void> {
  const lostEvent = nextEvent(
    f.locks,
    'lost',
    (e) => e.key === key && e.token === lock.token,
    f.ttl * 3 + 5_000,
  );
  expect(await f.backend.release(f.full(key), lock.token)).toBe(true);
  await within(aborted(lock.signal), f.ttl * 3 + 5_000, 'the lost signal');
  f.expectLockLost(lock.signal.reason, key);
  expect(lock.isHeld()).toBe(false);
  expect((await lostEvent).backend).toBe(BACKEND);
}
