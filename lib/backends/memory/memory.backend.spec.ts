import { afterEach, describe, expect, it } from '@jest/globals';
import { MemoryLockBackend } from './memory.backend';

describe('MemoryLockBackend', () => {
  let backend: MemoryLockBackend;
  afterEach(() => backend.close());

  it('hands the lock to waiters in arrival order, without barging', async () => {
    backend = new MemoryLockBackend();
    const never = new AbortController().signal;
    expect(await backend.tryAcquire({ key: 'k', token: 't0', ttlMs: 10_000 })).not.toBeNull();
    const order: string[] = [];
    const waiters = ['t1', 't2', 't3'].map((t) =>
      backend
        .acquire({ key: 'k', token: t, ttlMs: 10_000, waitMs: 5_000, signal: never })
        .then((g) => {
          order.push(t);
          return g;
        }),
    );
    // A newcomer must not jump the queue when the lock is handed over.
    expect(await backend.release('k', 't0')).toBe(true);
    expect(await backend.tryAcquire({ key: 'k', token: 'barger', ttlMs: 10_000 })).toBeNull();
    await waiters[0];
    expect(await backend.release('k', 't1')).toBe(true);
    await waiters[1];
    expect(await backend.release('k', 't2')).toBe(true);
    const grants = await Promise.all(waiters);
    expect(order).toEqual(['t1', 't2', 't3']);
    const fences = grants.map((g) => g!.fence!);
    expect(fences[0]).toBeLessThan(fences[1]);
    expect(fences[1]).toBeLessThan(fences[2]);
  });

  it('passes an expired lock to the next waiter and refuses the old owner', async () => {
    backend = new MemoryLockBackend();
    await backend.tryAcquire({ key: 'k', token: 'old', ttlMs: 30 });
    const grant = await backend.acquire({
      key: 'k',
      token: 'new',
      ttlMs: 10_000,
      waitMs: 2_000,
      signal: new AbortController().signal,
    });
    expect(grant).not.toBeNull();
    expect(await backend.extend('k', 'old', 1_000)).toBe(false);
    expect(await backend.release('k', 'old')).toBe(false);
    expect(await backend.isLocked('k')).toBe(true);
  });

  it('gives up a queued wait on timeout or abort and leaves the queue clean', async () => {
    backend = new MemoryLockBackend();
    await backend.tryAcquire({ key: 'k', token: 'holder', ttlMs: 10_000 });
    expect(
      await backend.acquire({
        key: 'k',
        token: 'w1',
        ttlMs: 10_000,
        waitMs: 20,
        signal: new AbortController().signal,
      }),
    ).toBeNull();
    const ac = new AbortController();
    const pending = backend.acquire({
      key: 'k',
      token: 'w2',
      ttlMs: 10_000,
      waitMs: 10_000,
      signal: ac.signal,
    });
    ac.abort();
    expect(await pending).toBeNull();
    await backend.release('k', 'holder');
    expect(await backend.isLocked('k')).toBe(false);
    expect(await backend.tryAcquire({ key: 'k', token: 'next', ttlMs: 1_000 })).not.toBeNull();
  });
});
