import { describe, expect, it } from '@jest/globals';
import { within } from '../support/async';
import { nextEvent, recordEvents } from '../support/lock-checks';
import { BACKEND } from '../conformance/battery/fixture';
import { memoryApp } from './memory-app';

// What the engine reports of a lock's life, whatever the store: event payloads and metrics.
describe('events and metrics', () => {
  const f = memoryApp();

  it('acquired / contended / released carry the unprefixed key, backend, token and fence', async () => {
    const key = f.newKey('events');
    const rec = recordEvents(f.locks, ['acquired', 'released', 'contended']);
    try {
      const a = await f.acquire(key);
      const contended = nextEvent(f.locks, 'contended', (e) => e.key === key, 5_000);
      const waiter = f.acquire(key, { waitTimeout: 10_000 });
      await contended;
      await a.release();
      const b = await within(waiter, 10_000, 'the waiter');
      await b.release();

      const acquired = rec.of('acquired', key);
      expect(acquired.map((e) => e.token)).toEqual([a.token, b.token]);
      const released = rec.of('released', key);
      expect(released.map((e) => e.token)).toEqual([a.token, b.token]);
      const contendedEvents = rec.of('contended', key);
      expect(contendedEvents.length).toBeGreaterThanOrEqual(1);
      expect(contendedEvents.map((e) => e.token)).toContain(b.token);
      for (const e of [...acquired, ...released, ...contendedEvents]) {
        expect(e.key).toBe(key);
        expect(e.backend).toBe(BACKEND);
        expect(typeof e.token).toBe('string');
      }
      expect(acquired.map((e) => e.fence)).toEqual([a.fence, b.fence]);
      expect(released.map((e) => e.fence)).toEqual([a.fence, b.fence]);
      // no event key carries the module prefix
      expect(rec.events.filter((e) => e.key.startsWith(f.prefix))).toEqual([]);

      // unsubscribing stops delivery
      rec.stop();
      const count = rec.events.length;
      const c = await f.acquire(key);
      await c.release();
      expect(rec.events).toHaveLength(count);
    } finally {
      rec.stop();
    }
  });

  it('metrics count attempts, grants, refusals and held locks', async () => {
    const key = f.newKey('metrics');
    const m0 = { ...f.metrics() };
    const a = await f.acquire(key);
    const m1 = { ...f.metrics() };
    expect(m1.lock_acquire_attempts_total).toBe(m0.lock_acquire_attempts_total + 1);
    expect(m1.lock_acquired_total).toBe(m0.lock_acquired_total + 1);
    expect(m1.lock_held).toBe(m0.lock_held + 1);
    expect(await f.tryAcquire(key)).toBeNull();
    const m2 = { ...f.metrics() };
    expect(m2.lock_acquire_attempts_total).toBe(m1.lock_acquire_attempts_total + 1);
    expect(m2.lock_not_acquired_total).toBe(m1.lock_not_acquired_total + 1);
    await a.release();
    const m3 = f.metrics();
    expect(m3.lock_held).toBe(m0.lock_held);
    expect(m3.lock_hold_seconds.count).toBe(m0.lock_hold_seconds.count + 1);
    expect(m3.lock_wait_seconds.count).toBeGreaterThanOrEqual(m0.lock_wait_seconds.count + 1);
  });
});
