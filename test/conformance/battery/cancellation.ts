import { describe, expect, it } from '@jest/globals';
import { LockAbortedError } from '../../../lib/errors/lock.errors';
import { settle, within } from '../../support/async';
import { QUICK_MS, type LockFixture } from './fixture';

/**
 * A caller's `signal` stops a wait at once, on every store, and the wait leaves nothing behind:
 * no queue entry, node or pinned connection keeps the key from the next caller.
 */
export function cancellation(f: LockFixture): void {
  describe('cancellation', () => {
    it('an aborted wait rejects LockAbortedError at once and leaves no trace in the store', async () => {
      const key = f.newKey('abort');
      const holder = await f.acquire(key);
      const controller = new AbortController();
      const waiter = settle(
        f.locks.acquire(key, { waitTimeout: 60_000, signal: controller.signal }),
      );
      // Let the wait reach the store (queue entry, node, lock wait) before aborting it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const abortedAt = performance.now();
      controller.abort(new Error('client went away'));
      const outcome = await within(waiter, QUICK_MS + 1_000, 'the aborted wait');
      expect(performance.now() - abortedAt).toBeLessThan(QUICK_MS);
      expect(outcome.ok).toBe(false);
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(LockAbortedError);
      expect(error).toMatchObject({
        code: 'LOCK_ABORTED',
        key,
        cause: { message: 'client went away' },
      });
      // Nothing of the aborted waiter is left: once the holder releases, the key is free for a
      // single try (a stale queue entry or node would make it busy or hand it to a ghost).
      await f.releaseFrees(holder, key);
      const next = await within(
        (async () => {
          for (;;) {
            const lock = await f.tryAcquire(key);
            if (lock) return lock;
            await new Promise((resolve) => setTimeout(resolve, 25));
          }
        })(),
        QUICK_MS * 3,
        'the key free again after the aborted wait',
      );
      await f.releaseFrees(next, key);
    });

    it('a signal aborted before the call rejects without touching the store', async () => {
      const key = f.newKey('pre-abort');
      const controller = new AbortController();
      controller.abort();
      await expect(f.locks.acquire(key, { signal: controller.signal })).rejects.toBeInstanceOf(
        LockAbortedError,
      );
      await expect(f.locks.tryAcquire(key, { signal: controller.signal })).rejects.toBeInstanceOf(
        LockAbortedError,
      );
      await f.expectLocked(key, false);
    });
  });
}
