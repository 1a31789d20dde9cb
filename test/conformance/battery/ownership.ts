import { describe, expect, it } from '@jest/globals';
import { aborted, within } from '../../support/async';
import { recordEvents } from '../../support/lock-checks';
import type { LockFixture } from './fixture';

/** Only the owner's token releases or extends; a late or repeated release frees nobody else. */
export function ownership(f: LockFixture): void {
  describe('ownership and release', () => {
    it('only the owner token can release or extend (raw backend)', async () => {
      const key = f.newKey('owner');
      const a = await f.acquire(key);
      expect(await f.backend.release(f.full(key), 'not-the-owner-token')).toBe(false);
      expect(await f.backend.extend(f.full(key), 'not-the-owner-token', 60_000)).toBe(false);
      expect(await f.backend.isLocked(f.full(key))).toBe(true);
      await f.expectSoleHolder(a, key);
      await f.releaseFrees(a, key);
    });

    it('double release is a no-op and never frees a new holder', async () => {
      const key = f.newKey('double');
      const rec = recordEvents(f.locks, ['released']);
      try {
        const a = await f.acquire(key);
        await a.release();
        await expect(a.release()).resolves.toBeUndefined();
        const b = await f.acquire(key, { waitTimeout: 5_000 });
        await expect(a.release()).resolves.toBeUndefined();
        // nor does the old token, sent straight to the store
        expect(await f.backend.release(f.full(key), a.token)).toBe(false);
        await f.expectSoleHolder(b, key);
        expect(rec.of('released', key).filter((e) => e.token === a.token)).toHaveLength(1);
        await f.releaseFrees(b, key);
      } finally {
        rec.stop();
      }
    });

    it('release after the lock was lost leaves the new holder in place', async () => {
      const key = f.newKey('rel-lost');
      const a = await f.acquire(key, { ttl: f.ttl });
      expect(await f.backend.release(f.full(key), a.token)).toBe(true);
      const b = await f.acquire(key, { waitTimeout: 5_000 });
      await within(aborted(a.signal), f.ttl * 3 + 5_000, "the old holder's lost signal");
      await expect(a.release()).resolves.toBeUndefined();
      await f.expectSoleHolder(b, key);
      await f.releaseFrees(b, key);
    });
  });
}
