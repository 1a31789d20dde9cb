import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { LockLostError } from '../../../lib/errors/lock.errors';
import { aborted, eventually, settle, sleep, within } from '../../support/async';
import { recordEvents } from '../../support/lock-checks';
import { BACKEND, QUICK_MS, type LockFixture, when } from './fixture';

/**
 * How long a lock lives: the ttl on a lease store (`capabilities.leaseBased`), the session on
 * a session store, renewal past either, explicit extend, and lockAtLeastFor.
 */
export function leaseLifetime(f: LockFixture): void {
  const { leaseBased } = f.target.capabilities;

  describe('ttl, renewal and extend', () => {
    when(leaseBased)(
      'ttl expiry: a holder that stops renewing loses the lock and another client takes over',
      async () => {
        const key = f.newKey('expiry');
        const lost = recordEvents(f.locks, ['lost']);
        try {
          const t0 = performance.now();
          const a = await f.acquire(key, { ttl: f.ttl, autoRenew: false });
          const b = await f.acquire(key, { waitTimeout: f.ttl * 10 + 5_000 });
          const tookOverAfter = performance.now() - t0;
          // not before A's lease ran out
          expect(tookOverAfter).toBeGreaterThanOrEqual(f.ttl * 0.9);
          // never two holders that both believe they hold it
          expect(a.isHeld()).toBe(false);
          await f.expectSoleHolder(b, key);
          await within(aborted(a.signal), QUICK_MS, "the expired holder's signal");
          f.expectLockLost(a.signal.reason, key);
          await eventually(
            () => lost.of('lost', key).some((e) => e.token === a.token),
            QUICK_MS,
            "a 'lost' event for the expired holder",
          );
          await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
          // release after expiry leaves the new holder's lock in place
          await a.release();
          await f.expectSoleHolder(b, key);
          expect(b.fence as number).toBeGreaterThan(a.fence as number);
          await f.releaseFrees(b, key);
        } finally {
          lost.stop();
        }
      },
    );

    when(leaseBased)(
      'a crashed holder (raw grant, never renewed nor released) blocks others only for its ttl',
      async () => {
        const key = f.newKey('crashed');
        const crashedToken = `crashed-${randomUUID()}`;
        const t0 = performance.now();
        // Taken straight on the store, as by a process that then died: no core, no watchdog,
        // so only the store's own expiry can free it.
        const grant = await f.backend.tryAcquire({
          key: f.full(key),
          token: crashedToken,
          ttlMs: f.ttl,
        });
        expect(grant).not.toBeNull();
        await f.expectLocked(key, true);
        expect(await f.tryAcquire(key)).toBeNull();
        const b = await f.acquire(key, { waitTimeout: f.ttl * 10 + 5_000 });
        expect(performance.now() - t0).toBeGreaterThanOrEqual(f.ttl * 0.9);
        expect(b.fence as number).toBeGreaterThan(grant?.fence as number);
        // the crashed holder's late release or extend cannot touch the new holder
        expect(await f.backend.release(f.full(key), crashedToken)).toBe(false);
        expect(await f.backend.extend(f.full(key), crashedToken, f.ttl)).toBe(false);
        await f.expectSoleHolder(b, key);
        await f.releaseFrees(b, key);
      },
    );

    when(!leaseBased)(
      'a session lock (raw grant, never renewed) outlives its ttl until released',
      async () => {
        const key = f.newKey('session');
        const token = `session-${randomUUID()}`;
        const grant = await f.backend.tryAcquire({ key: f.full(key), token, ttlMs: f.ttl });
        expect(grant).not.toBeNull();
        try {
          // No store-side expiry: the session (connection, ZooKeeper session) holds it.
          await sleep(f.ttl * 2.5);
          expect(await f.backend.isLocked(f.full(key))).toBe(true);
          expect(await f.tryAcquire(key)).toBeNull();
          expect(await f.backend.extend(f.full(key), token, f.ttl)).toBe(true);
        } finally {
          expect(await f.backend.release(f.full(key), token)).toBe(true);
        }
        await f.expectLocked(key, false);
        expect(await f.backend.extend(f.full(key), token, f.ttl)).toBe(false);
      },
    );

    it('renewal keeps a lock held past its ttl while nobody else can take it', async () => {
      const key = f.newKey('renew');
      const rec = recordEvents(f.locks, ['renewed', 'lost']);
      try {
        const a = await f.acquire(key, { ttl: f.ttl });
        // The competitor's wait doubles as the passage of ~3 ttls.
        const t0 = performance.now();
        const b = await settle(f.locks.acquire(key, { waitTimeout: f.ttl * 3 }));
        if (b.ok) f.track(b.value);
        expect(b.ok).toBe(false);
        if (!b.ok) f.expectNotAcquired(b.error, key);
        expect(performance.now() - t0).toBeGreaterThanOrEqual(f.ttl * 3 * 0.9);
        expect(a.signal.aborted).toBe(false);
        await f.expectSoleHolder(a, key);
        expect(rec.of('lost', key)).toEqual([]);
        // Lease or session, the engine renews (a session store's renewal checks it still holds).
        const renewed = rec.of('renewed', key).filter((e) => e.token === a.token);
        expect(renewed.length).toBeGreaterThanOrEqual(2);
        expect(renewed[0].backend).toBe(BACKEND);
        await f.releaseFrees(a, key);
      } finally {
        rec.stop();
      }
    });

    it('explicit extend keeps an autoRenew:false lock held past its original ttl', async () => {
      const key = f.newKey('extend');
      const t0 = performance.now();
      const a = await f.acquire(key, { ttl: f.ttl, autoRenew: false });
      await sleep(f.ttl / 3);
      await a.extend();
      await a.extend(f.ttl * 5);
      const remaining = t0 + f.ttl * 1.5 - performance.now();
      if (remaining > 0) await sleep(remaining);
      expect(a.signal.aborted).toBe(false);
      await f.expectSoleHolder(a, key);
      await f.releaseFrees(a, key);
      // extend after release is refused
      await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
    });

    it('extend after the lock was lost rejects LockLostError', async () => {
      const key = f.newKey('extend-lost');
      const a = await f.acquire(key, { ttl: Math.max(f.ttl * 20, 10_000), autoRenew: false });
      expect(await f.backend.release(f.full(key), a.token)).toBe(true);
      const err = await settle(a.extend());
      expect(err.ok).toBe(false);
      if (!err.ok) f.expectLockLost(err.error, key);
      expect(a.isHeld()).toBe(false);
      expect(a.signal.aborted).toBe(true);
    });

    it('lockAtLeastFor keeps the lock taken after an early release', async () => {
      const key = f.newKey('least');
      const atLeast = Math.max(400, f.ttl);
      const t0 = performance.now();
      const a = await f.acquire(key, { lockAtLeastFor: atLeast });
      await a.release();
      await f.expectLocked(key, true);
      const b = await f.acquire(key, { waitTimeout: atLeast + 10_000 });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(atLeast * 0.9);
      await b.release();
    });
  });
}
