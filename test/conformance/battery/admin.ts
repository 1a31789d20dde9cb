import { describe, expect } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { LockConfigError } from '../../../lib/errors/lock.errors';
import { aborted, within } from '../../support/async';
import { QUICK_MS, when, type LockFixture } from './fixture';

/**
 * `inspect` and `forceRelease` on backends that can (the target says so); the others refuse
 * both with `LockConfigError`, never silently.
 */
export function admin(f: LockFixture): void {
  const { admin: supported = false } = f.target;
  const { leaseBased, waiting } = f.target.capabilities;
  describe('inspect and forceRelease', () => {
    when(!supported)('are refused with LockConfigError on this backend', async () => {
      await expect(f.locks.inspect(f.newKey('no-admin'))).rejects.toBeInstanceOf(LockConfigError);
      await expect(f.locks.forceRelease(f.newKey('no-admin'))).rejects.toBeInstanceOf(
        LockConfigError,
      );
    });

    when(supported)(
      'inspect tells a free key from a held one, with the holder’s fence',
      async () => {
        const key = f.newKey('inspect');
        const free = await f.locks.inspect(key);
        expect(free).toMatchObject({ held: false, mine: false });
        if (free.holders !== undefined) expect(free.holders).toBe(0);
        const lock = await f.acquire(key);
        const held = await f.locks.inspect(key);
        expect(held).toMatchObject({ held: true, mine: true, fence: lock.fence });
        if (held.holders !== undefined) expect(held.holders).toBe(1);
        if (leaseBased) {
          expect(held.remainingMs).toBeGreaterThan(0);
          expect(held.remainingMs).toBeLessThanOrEqual(30_000);
        }
        await f.releaseFrees(lock, key);
        const after = await f.locks.inspect(key);
        expect(after).toMatchObject({ held: false, mine: false });
        // When free, the fence says where the key's fences stand: the next grant's is higher.
        if (after.fence !== null) expect(after.fence).toBeGreaterThanOrEqual(lock.fence as number);
      },
    );

    when(supported && waiting !== 'poll')(
      'inspect counts the callers queued for a key',
      async () => {
        const key = f.newKey('queue');
        const holder = await f.acquire(key);
        const controller = new AbortController();
        const waiter = f.locks
          .acquire(key, { waitTimeout: 30_000, signal: controller.signal })
          .catch(() => undefined);
        try {
          await within(
            (async () => {
              while (((await f.locks.inspect(key)).waiting ?? 0) < 1) {
                await new Promise((resolve) => setTimeout(resolve, 20));
              }
            })(),
            QUICK_MS * 3,
            'the waiter to show in inspect().waiting',
          );
        } finally {
          controller.abort();
          await waiter;
        }
        await f.releaseFrees(holder, key);
      },
    );

    when(supported)(
      'forceRelease frees a key held here: its signal aborts, the next grant fences higher',
      async () => {
        const key = f.newKey('force');
        const a = await f.acquire(key);
        expect(await f.locks.forceRelease(key)).toBe(true);
        await within(aborted(a.signal), QUICK_MS, 'the force-released holder’s signal');
        expect(a.isHeld()).toBe(false);
        const b = await f.acquire(key, { waitTimeout: 5_000 });
        expect(b.fence as number).toBeGreaterThan(a.fence as number);
        await expect(a.release()).resolves.toBeUndefined(); // the stale holder frees nothing
        await f.expectSoleHolder(b, key);
        await f.releaseFrees(b, key);
        expect(await f.locks.forceRelease(key)).toBe(false); // nothing held: nothing freed
      },
    );

    when(supported)(
      'forceRelease frees a key another process holds: its renewal then fails',
      async () => {
        const key = f.newKey('force-remote');
        // Taken straight on the store, as by a process that hung with the lock.
        const token = `stale-${randomUUID()}`;
        const grant = await f.backend.tryAcquire({ key: f.full(key), token, ttlMs: 60_000 });
        expect(grant).not.toBeNull();
        await f.expectLocked(key, true);
        expect(await f.locks.forceRelease(key)).toBe(true);
        expect(await f.backend.extend(f.full(key), token, 60_000)).toBe(false);
        const next = await f.acquire(key, { waitTimeout: 5_000 });
        expect(next.fence as number).toBeGreaterThan(grant!.fence as number);
        await f.releaseFrees(next, key);
      },
    );
  });
}
