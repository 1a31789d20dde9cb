import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Locked, LockAbortedError, LockLostError, LockService } from '../../lib/index';
import { aborted, settle, sleep, within } from '../support/async';
import { createLockApp } from '../support/lock-app';
import { recordEvents } from '../support/lock-checks';
import { memoryApp } from './memory-app';

// The caller's signal and maxHold are the engine's: once, on memory (the battery's cancellation
// concern checks every store leaves nothing behind).
describe('cancellation by the caller’s signal', () => {
  const f = memoryApp();

  it('withLock stops waiting at once on abort and never runs fn', async () => {
    const key = f.newKey('wl-abort');
    const holder = await f.acquire(key);
    const controller = new AbortController();
    let ran = false;
    const waiting = settle(
      f.locks.withLock(key, () => (ran = true), { waitTimeout: 60_000, signal: controller.signal }),
    );
    await sleep(30);
    controller.abort('user cancelled');
    const outcome = await within(waiting, 500, 'the aborted withLock');
    expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(LockAbortedError);
    expect(outcome.ok ? undefined : outcome.error).toMatchObject({ cause: 'user cancelled' });
    expect(ran).toBe(false);
    await f.releaseFrees(holder, key);
  });

  it('a multi-key wait aborted half-way gives back the keys it took', async () => {
    const [a, b] = [f.newKey('mk-a'), f.newKey('mk-b')].sort();
    const holder = await f.acquire(b);
    const controller = new AbortController();
    const waiting = settle(
      f.locks.acquire([a, b], { waitTimeout: 60_000, signal: controller.signal }),
    );
    await sleep(30);
    await f.expectLocked(a, true); // taken first, in canonical order
    controller.abort();
    const outcome = await within(waiting, 500, 'the aborted multi-key wait');
    expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(LockAbortedError);
    await f.expectLocked(a, false);
    await f.releaseFrees(holder, b);
  });

  it('a signal that never aborts changes nothing: the wait ends with the grant', async () => {
    const key = f.newKey('no-abort');
    const holder = await f.acquire(key);
    const waiting = f.locks.acquire(key, {
      waitTimeout: 5_000,
      signal: new AbortController().signal,
    });
    await sleep(20);
    await holder.release();
    const lock = f.track(await waiting);
    expect(lock.isHeld()).toBe(true);
  });
});

describe('@Locked takes the wait’s signal from the call', () => {
  @Injectable()
  class Reports {
    runs = 0;
    @Locked('report:{0}', {
      waitTimeout: 60_000,
      signal: (_id: string, signal?: AbortSignal) => signal,
    })
    async build(_id: string, _signal?: AbortSignal): Promise<string> {
      this.runs++;
      return 'built';
    }
  }

  it('aborting the call’s signal stops the wait; the method never runs', async () => {
    const t = await createLockApp(
      { backends: { mem: { type: 'memory' } } },
      { providers: [Reports] },
    );
    try {
      const reports = t.app.get(Reports);
      const holder = await t.app.get(LockService).acquire('report:7');
      const controller = new AbortController();
      const call = settle(reports.build('7', controller.signal));
      await sleep(30);
      controller.abort();
      const outcome = await within(call, 500, 'the aborted @Locked call');
      expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(LockAbortedError);
      expect(reports.runs).toBe(0);
      await holder.release();
      // Without a signal (the function returns undefined) it waits and runs as usual.
      expect(await reports.build('7')).toBe('built');
      expect(reports.runs).toBe(1);
    } finally {
      await t.close();
    }
  });
});

describe('maxHold', () => {
  const f = memoryApp();

  it('gives the lock up at maxHold although renewal would keep it: signal, lost event, key free', async () => {
    const key = f.newKey('max-hold');
    const rec = recordEvents(f.locks, ['lost']);
    try {
      const started = performance.now();
      // ttl 300 renews every 100 ms: without maxHold it would be held for as long as we like.
      const lock = await f.acquire(key, { ttl: 300, maxHold: 400 });
      await within(aborted(lock.signal), 2_000, 'the maxHold give-up');
      const elapsed = performance.now() - started;
      expect(elapsed).toBeGreaterThanOrEqual(390);
      expect(elapsed).toBeLessThan(1_000);
      expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect((lock.signal.reason as LockLostError).reason).toMatch(/maxHold of 400 ms/);
      expect(lock.isHeld()).toBe(false);
      expect(rec.of('lost', key)).toHaveLength(1);
      await f.expectLocked(key, false);
      await expect(lock.release()).resolves.toBeUndefined();
    } finally {
      rec.stop();
    }
  });

  it('the module default applies unless a call sets its own', async () => {
    const t = await createLockApp({
      backends: { mem: { type: 'memory' } },
      defaults: { maxHold: 250 },
    });
    try {
      const byDefault = await t.locks.acquire('d1');
      const ownCap = await t.locks.acquire('d2', { maxHold: 60_000 });
      await within(aborted(byDefault.signal), 2_000, 'the default maxHold');
      expect(ownCap.isHeld()).toBe(true);
      await ownCap.release();
    } finally {
      await t.close();
    }
  });

  it('withLock: the routine keeps running but its signal says the lock is gone', async () => {
    const key = f.newKey('max-hold-wl');
    const result = await f.locks.withLock(
      key,
      async (lock) => {
        await within(aborted(lock.signal), 2_000, 'maxHold inside withLock');
        return lock.isHeld();
      },
      { maxHold: 200 },
    );
    expect(result).toBe(false);
    await f.expectLocked(key, false);
  });
});
