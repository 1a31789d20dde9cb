import { describe, expect, it } from '@jest/globals';
import { LockLostError } from '../../../lib/errors/lock.errors';
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
      const lostEvent = nextEvent(
        f.locks,
        'lost',
        (e) => e.key === key && e.token === a.token,
        f.ttl * 3 + 5_000,
      );
      // lose it behind the holder's back; the watchdog's next renewal (ttl/3) is refused
      expect(await f.backend.release(f.full(key), a.token)).toBe(true);
      await within(aborted(a.signal), f.ttl * 3 + 5_000, 'the lost signal');
      f.expectLockLost(a.signal.reason, key);
      expect(a.isHeld()).toBe(false);
      const e = await lostEvent;
      expect(e.backend).toBe(BACKEND);
      expect(f.metrics().lock_lost_total).toBe(lostBefore + 1);
      await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
      await expect(a.release()).resolves.toBeUndefined();
      const b = await f.tryAcquire(key);
      expect(b).not.toBeNull();
      await b?.release();
    });
  });
}
