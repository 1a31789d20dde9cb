import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { LockGrant } from '../../../lib/core/contract/lock-backend';
import { settle, sleep, stillPendingAfter, within } from '../../support/async';
import { nextEvent } from '../../support/lock-checks';
import { BACKEND, QUICK_MS, type LockFixture, when } from './fixture';

/**
 * Try versus wait, and how a waiter wakes: the engine's waiting policy on this store, and for a
 * store with its own queue (`capabilities.waiting` not `'poll'`) that queue asked directly.
 */
export function waiting(f: LockFixture): void {
  const { waiting } = f.target.capabilities;

  describe('try vs wait', () => {
    it('tryAcquire on a busy key returns null quickly, whatever waitTimeout says', async () => {
      const key = f.newKey('try');
      await f.acquire(key);
      const t0 = performance.now();
      expect(await f.tryAcquire(key)).toBeNull();
      expect(await f.tryAcquire(key, { waitTimeout: 10_000 })).toBeNull();
      expect(performance.now() - t0).toBeLessThan(QUICK_MS);
    });

    it('acquire with waitTimeout 0 rejects LockNotAcquiredError at once', async () => {
      const key = f.newKey('wait0');
      await f.acquire(key);
      const t0 = performance.now();
      const r = await settle(f.acquire(key, { waitTimeout: 0 }));
      expect(performance.now() - t0).toBeLessThan(QUICK_MS);
      expect(r.ok).toBe(false);
      if (!r.ok) f.expectNotAcquired(r.error, key);
    });

    it('acquire with waitTimeout 200 rejects after about 200 ms', async () => {
      const key = f.newKey('wait200');
      await f.acquire(key);
      const t0 = performance.now();
      const r = await settle(f.acquire(key, { waitTimeout: 200 }));
      const elapsed = performance.now() - t0;
      expect(r.ok).toBe(false);
      if (!r.ok) {
        const err = f.expectNotAcquired(r.error, key);
        expect(err.waitedMs).toBeGreaterThanOrEqual(180);
      }
      expect(elapsed).toBeGreaterThanOrEqual(180);
      expect(elapsed).toBeLessThan(200 + 3_000);
    });

    it("a waiter reports 'contended' and gets the lock promptly once the holder releases", async () => {
      const key = f.newKey('handoff');
      const a = await f.acquire(key);
      // A 'queue-first' store says itself when a waiter queues (onQueued): the event proves it.
      const contended = nextEvent(f.locks, 'contended', (e) => e.key === key, 5_000);
      const waiter = f.acquire(key, { waitTimeout: 20_000 });
      const event = await contended;
      expect(await stillPendingAfter(waiter, 20)).toBe(true);
      const t0 = performance.now();
      await a.release();
      const b = await within(waiter, 10_000, 'the waiter');
      expect(performance.now() - t0).toBeLessThan(QUICK_MS);
      expect(b.isHeld()).toBe(true);
      expect(b.fence as number).toBeGreaterThan(a.fence as number);
      expect(event).toMatchObject({ backend: BACKEND, token: b.token });
    });

    it('waitTimeout Infinity waits until the holder releases', async () => {
      const key = f.newKey('forever');
      const a = await f.acquire(key);
      const contended = nextEvent(f.locks, 'contended', (e) => e.key === key, 5_000);
      const waiter = f.acquire(key, { waitTimeout: Infinity });
      await contended;
      // A timer armed with Infinity would fire after 1 ms: the waiter must still be waiting.
      expect(await stillPendingAfter(waiter, Math.max(f.ttl, 300))).toBe(true);
      await a.release();
      const b = await within(waiter, 10_000, 'the waiter');
      expect(b.isHeld()).toBe(true);
    });

    it('a waiter that waits longer than its own ttl still gets the lock, with a full lease', async () => {
      // Its lease counts from its grant, not from its request: counted from the request, a wait
      // longer than the ttl made a granted lock look expired on arrival, and it was given back.
      const key = f.newKey('longwait');
      const a = await f.acquire(key, { ttl: Math.max(f.ttl * 10, 5_000) });
      const waiter = f.acquire(key, { ttl: f.ttl, waitTimeout: 20_000 });
      expect(await stillPendingAfter(waiter, f.ttl * 3)).toBe(true);
      await a.release();
      const b = await within(waiter, 10_000, 'the waiter');
      expect(b.isHeld()).toBe(true);
      // Its lease runs from the grant: still held a ttl later (counted from the request, it
      // would have run out at once). Renewal over many ttls is lease-lifetime's concern.
      await sleep(f.ttl);
      expect(b.isHeld()).toBe(true);
      await b.release();
    });

    when(waiting !== 'poll')(
      `the store's own queue (${waiting}): a raw waiter gives up on its wait or an abort and leaves the queue`,
      async () => {
        const key = f.newKey('queue');
        const full = f.full(key);
        let queued = 0;
        const raw = (waitMs: number, signal: AbortSignal, token = `raw-${randomUUID()}`) =>
          f.backend.acquire!({
            key: full,
            token,
            ttlMs: 60_000,
            waitMs,
            signal,
            onQueued: () => queued++,
          });
        if (waiting === 'queue-first') {
          // Its first step takes a free lock (the engine sends no separate try first).
          const token = `raw-${randomUUID()}`;
          const grant = await within(
            raw(5_000, new AbortController().signal, token),
            5_000,
            'a queue-first grant of a free key',
          );
          expect(Number.isSafeInteger(grant?.fence)).toBe(true);
          expect(queued).toBe(0);
          expect(await f.backend.release(full, token)).toBe(true);
        }
        const holder = await f.acquire(key);

        let t0 = performance.now();
        const timedOut = await within(
          raw(300, new AbortController().signal),
          300 + 5_000,
          'a raw wait of 300 ms',
        );
        expect(timedOut).toBeNull();
        expect(performance.now() - t0).toBeGreaterThanOrEqual(270);
        // The engine emits 'contended' for a queue-first store only when the store says so.
        if (waiting === 'queue-first') expect(queued).toBeGreaterThanOrEqual(1);

        const abort = new AbortController();
        const abandoned = raw(60_000, abort.signal);
        expect(await stillPendingAfter(abandoned, 100)).toBe(true);
        t0 = performance.now();
        abort.abort();
        // Postgres for-update waits in chunks of lock_timeout (2 s) between abort checks.
        const result: LockGrant | null = await within(abandoned, 5_000, 'an aborted raw wait');
        expect(result).toBeNull();
        expect(performance.now() - t0).toBeLessThan(4_000);

        // Neither waiter is still in line: the release frees the key instead of handing it over.
        await holder.release();
        await f.expectLocked(key, false);
        const next = await f.tryAcquire(key);
        expect(next).not.toBeNull();
      },
      30_000,
    );
  });
}
