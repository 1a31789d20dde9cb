import { afterEach, describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import type { LockMode, QueuedRequest } from '../../core/contract/lock-backend';
import { MemoryLockBackend } from './memory.backend';

const never = new AbortController().signal;

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

  describe('shared and counted locks', () => {
    /** A queued request of `mode` (and `permits`) for key `k`, recording when it is granted. */
    const ask = (
      token: string,
      mode: LockMode,
      order: string[],
      more: Partial<QueuedRequest> = {},
    ) =>
      backend
        .acquire({ key: 'k', token, ttlMs: 10_000, waitMs: 5_000, signal: never, mode, ...more })
        .then((grant) => {
          if (grant) order.push(token);
          return grant;
        });

    it('admits readers together, a writer alone, and a waiting writer holds back new readers', async () => {
      backend = new MemoryLockBackend();
      const order: string[] = [];
      const r1 = await ask('r1', 'shared', order);
      const r2 = await ask('r2', 'shared', order);
      expect(r1).not.toBeNull();
      expect(r2).not.toBeNull();
      const w = ask('w', 'exclusive', order);
      // A reader arriving after a waiting writer queues behind it (writer preference).
      expect(
        await backend.tryAcquire({ key: 'k', token: 'late', ttlMs: 1_000, mode: 'shared' }),
      ).toBeNull();
      const r3 = ask('r3', 'shared', order);
      const r4 = ask('r4', 'shared', order);
      const w2 = ask('w2', 'exclusive', order);
      expect((await backend.inspect('k')).waiting).toBe(4);
      await backend.release('k', 'r1');
      expect(order).toEqual(['r1', 'r2']);
      await backend.release('k', 'r2');
      await w;
      expect(order).toEqual(['r1', 'r2', 'w']);
      expect(await backend.inspect('k')).toMatchObject({ holders: 1, mode: 'exclusive' });
      // The writer's release lets both queued readers in together, and not the second writer.
      await backend.release('k', 'w');
      await Promise.all([r3, r4]);
      expect(order).toEqual(['r1', 'r2', 'w', 'r3', 'r4']);
      expect(await backend.inspect('k')).toMatchObject({
        held: true,
        holders: 2,
        mode: 'shared',
        permits: 1,
        slots: [0, 0],
        waiting: 1,
      });
      await backend.release('k', 'r3');
      await backend.release('k', 'r4');
      const last = await w2;
      expect(order.at(-1)).toBe('w2');
      // Fences rise across every grant of the key, whatever its mode.
      const fences = [r1, r2, await w, await r3, await r4, last].map((g) => g!.fence!);
      expect([...fences].sort((a, b) => a - b)).toEqual(fences);
      expect(new Set(fences).size).toBe(fences.length);
    });

    it('lets the readers behind a writer in when the writer gives up its wait', async () => {
      backend = new MemoryLockBackend();
      const order: string[] = [];
      await ask('r1', 'shared', order);
      const writerGone = new AbortController();
      const w = ask('w', 'exclusive', order, { signal: writerGone.signal });
      const r2 = ask('r2', 'shared', order);
      const timedOut = ask('w-short', 'exclusive', order, { waitMs: 30 });
      writerGone.abort();
      expect(await w).toBeNull();
      expect(await r2).not.toBeNull();
      expect(await timedOut).toBeNull();
      expect(await backend.inspect('k')).toMatchObject({ holders: 2, waiting: 0, mode: 'shared' });
      await backend.release('k', 'r1');
      await backend.release('k', 'r2');
      expect(await backend.inspect('k')).toMatchObject({ held: false, holders: 0, waiting: 0 });
    });

    it('grants up to permits holders, each the lowest free slot, FIFO beyond', async () => {
      backend = new MemoryLockBackend();
      const order: string[] = [];
      const counted = { permits: 3 };
      const grants = await Promise.all(
        ['a', 'b', 'c'].map((t) => ask(t, 'exclusive', order, counted)),
      );
      expect(grants.map((g) => g!.permit)).toEqual([0, 1, 2]);
      const d = ask('d', 'exclusive', order, counted);
      const e = ask('e', 'exclusive', order, counted);
      expect(
        await backend.tryAcquire({ key: 'k', token: 'x', ttlMs: 1_000, permits: 3 }),
      ).toBeNull();
      await backend.release('k', 'b');
      expect((await d)!.permit).toBe(1);
      await backend.release('k', 'a');
      expect((await e)!.permit).toBe(0);
      expect(order).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(await backend.inspect('k')).toMatchObject({
        holders: 3,
        permits: 3,
        slots: [0, 1, 2],
      });
      // Each holder renews and releases its own slot only.
      expect(await backend.extend('k', 'c', 5_000)).toBe(true);
      expect(await backend.extend('k', 'a', 5_000)).toBe(false);
      expect(await backend.release('k', 'c')).toBe(true);
      expect(await backend.release('k', 'c')).toBe(false);
      expect(await backend.inspect('k')).toMatchObject({ holders: 2, slots: [0, 1] });
      expect(await backend.forceRelease('k')).toBe(true);
      expect(await backend.isLocked('k')).toBe(false);
      expect(await backend.release('k', 'd')).toBe(false);
    });

    it('refuses a request whose permits disagree with the key’s holders or waiters', async () => {
      backend = new MemoryLockBackend();
      await backend.tryAcquire({ key: 'k', token: 'a', ttlMs: 10_000, permits: 3 });
      await expect(
        backend.tryAcquire({ key: 'k', token: 'b', ttlMs: 10_000, permits: 2 }),
      ).rejects.toThrow(
        expect.objectContaining({ constructor: LockConfigError, field: 'permits' }),
      );
      // A mutex (or a reader) on a counted key disagrees too: 1 is a count like any other.
      await expect(
        backend.acquire({ key: 'k', token: 'c', ttlMs: 10_000, waitMs: 1_000, signal: never }),
      ).rejects.toBeInstanceOf(LockConfigError);
      await expect(
        backend.tryAcquire({ key: 'k', token: 'd', ttlMs: 10_000, mode: 'shared' }),
      ).rejects.toBeInstanceOf(LockConfigError);
      expect(await backend.inspect('k')).toMatchObject({ holders: 1, waiting: 0, permits: 3 });
      // Once the key is idle, the next holder sets its count.
      await backend.release('k', 'a');
      const mutex = await backend.tryAcquire({ key: 'k', token: 'e', ttlMs: 10_000 });
      expect(mutex).toMatchObject({ permit: 0 });
      expect(await backend.inspect('k')).toMatchObject({ holders: 1, permits: 1 });
    });

    it('expires each holder by its own lease and hands its place to a waiter', async () => {
      backend = new MemoryLockBackend();
      await backend.tryAcquire({ key: 'k', token: 'short', ttlMs: 40, permits: 2 });
      await backend.tryAcquire({ key: 'k', token: 'long', ttlMs: 10_000, permits: 2 });
      const waiter = await backend.acquire({
        key: 'k',
        token: 'w',
        ttlMs: 10_000,
        waitMs: 2_000,
        signal: never,
        permits: 2,
      });
      expect(waiter).toMatchObject({ permit: 0 });
      expect(await backend.extend('k', 'short', 1_000)).toBe(false);
      expect(await backend.inspect('k')).toMatchObject({ holders: 2, slots: [0, 1] });
    });
  });
});
