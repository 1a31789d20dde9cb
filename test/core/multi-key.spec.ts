import { describe, expect, it } from '@jest/globals';
import { countBackendCalls } from '../support/lock-checks';
import { memoryApp } from './memory-app';

// The engine puts a multi-key request in canonical order and drops repeated keys; what the
// store does with the keys (all taken, rolled back, no deadlock) is the battery's.
describe('multi-key order', () => {
  const f = memoryApp();
  const pair = (): [string, string] => {
    const base = f.newKey('mk');
    return [`${base}-a`, `${base}-b`];
  };

  it('takes keys in canonical order whatever order they are given in', async () => {
    const [ka, kb] = pair();
    const spy = countBackendCalls(f.backend);
    let lock;
    try {
      lock = await f.acquire([kb, ka]);
    } finally {
      spy.restore();
    }
    expect(lock.keys).toEqual([ka, kb]);
    expect(lock.key).toBe(`${ka},${kb}`);
    expect(lock.fences).toHaveLength(2);
    expect(lock.fence).toBe(lock.fences[0]);
    // granted in that order: the first key's fence is the older one
    expect(lock.fences[0] as number).toBeLessThan(lock.fences[1] as number);
    expect(spy.counts.tryAcquire).toBe(2);
    await lock.release();
    await f.expectLocked(ka, false);
    await f.expectLocked(kb, false);
  });

  it('a key given twice is taken once (no self-deadlock)', async () => {
    const [ka, kb] = pair();
    const lock = await f.acquire([kb, ka, kb, ka], { waitTimeout: 0 });
    expect(lock.keys).toEqual([ka, kb]);
    expect(lock.fences).toHaveLength(2);
    await f.expectLocked(ka, true);
    await f.expectLocked(kb, true);
    await lock.release();
    await f.expectLocked(ka, false);
    await f.expectLocked(kb, false);
  });
});
