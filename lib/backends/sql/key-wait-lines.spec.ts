import { describe, expect, it } from '@jest/globals';
import { KeyWaitLines, type LinePlace } from './key-wait-lines';
import { Pulse, sleepUntilWoken } from '../../core/shared/wake-up';

const never = (): AbortSignal => new AbortController().signal;
const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('KeyWaitLines', () => {
  it('makes the first caller head at once and the others head in arrival order', async () => {
    const lines = new KeyWaitLines();
    const order: number[] = [];
    const places = [1, 2, 3].map((n) =>
      lines.join('k', Infinity, never()).then((place) => {
        order.push(n);
        return place as LinePlace;
      }),
    );
    const first = await places[0];
    await tick();
    expect(order).toEqual([1]);
    expect(lines.size('k')).toBe(3);
    first.leave();
    first.leave(); // idempotent: the second caller is not skipped
    const second = await places[1];
    await tick();
    expect(order).toEqual([1, 2]);
    second.leave();
    (await places[2]).leave();
    expect(order).toEqual([1, 2, 3]);
    expect(lines.size('k')).toBe(0);
  });

  it('keeps keys apart', async () => {
    const lines = new KeyWaitLines();
    const a = await lines.join('a', Infinity, never());
    const b = await lines.join('b', Infinity, never());
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    a?.leave();
    b?.leave();
  });

  it('a caller in line gives up on its timeout or abort, leaves the line, and is skipped', async () => {
    const lines = new KeyWaitLines();
    const head = (await lines.join('k', Infinity, never())) as LinePlace;
    const t0 = performance.now();
    expect(await lines.join('k', 50, never())).toBeNull();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    const controller = new AbortController();
    const aborted = lines.join('k', Infinity, controller.signal);
    const last = lines.join('k', Infinity, never());
    expect(lines.size('k')).toBe(3);
    controller.abort();
    expect(await aborted).toBeNull();
    expect(lines.size('k')).toBe(2);
    head.leave();
    const next = await last;
    expect(next).not.toBeNull();
    next?.leave();
    expect(lines.size('k')).toBe(0);
  });

  it('answers null at once for an aborted signal, no time left, or closed lines; close() frees the callers in line', async () => {
    const lines = new KeyWaitLines();
    const controller = new AbortController();
    controller.abort();
    expect(await lines.join('k', Infinity, controller.signal)).toBeNull();
    expect(await lines.join('k', 0, never())).toBeNull();
    const head = await lines.join('k', Infinity, never());
    const behind = lines.join('k', Infinity, never());
    lines.close();
    expect(await behind).toBeNull();
    expect(await lines.join('other', Infinity, never())).toBeNull();
    head?.leave();
  });

  it('counts the callers not waiting in the database', async () => {
    const lines = new KeyWaitLines();
    const head = (await lines.join('k', Infinity, never())) as LinePlace;
    const behind = lines.join('k', Infinity, never());
    expect(lines.waitingHere('k')).toBe(2);
    head.inDatabase = true;
    expect(lines.waitingHere('k')).toBe(1);
    head.leave();
    (await behind)?.leave();
  });
});

describe('sleepUntilWoken', () => {
  it('ends on its timer, its signal, or a wake source, whichever first', async () => {
    let t0 = performance.now();
    await sleepUntilWoken(30, undefined);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);

    const controller = new AbortController();
    t0 = performance.now();
    const sleeping = sleepUntilWoken(10_000, controller.signal);
    controller.abort();
    await sleeping;
    expect(performance.now() - t0).toBeLessThan(1_000);

    const pulse = new Pulse();
    t0 = performance.now();
    const woken = sleepUntilWoken(Infinity, undefined, [pulse.source]);
    pulse.fire();
    await woken;
    expect(performance.now() - t0).toBeLessThan(1_000);
    pulse.fire(); // nobody sleeps on it any more
  });

  it('a source that wakes while it registers ends the sleep at once', async () => {
    let stopped = 0;
    await sleepUntilWoken(10_000, undefined, [
      (wake) => {
        wake();
        return () => stopped++;
      },
    ]);
    expect(stopped).toBe(1);
  });
});
