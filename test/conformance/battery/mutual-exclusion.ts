import { describe, expect, it } from '@jest/globals';
import type { Lock, LockOptions } from '../../../lib/lock.interfaces';
import type { LockService } from '../../../lib/lock.service';
import { sleep } from '../../support/async';
import { BACKEND, type LockFixture, when } from './fixture';

/**
 * N contenders x rounds on one key, half through `withLock`, half through bare `acquire`, each
 * doing read -> random sleep -> write on a shared counter: a lost update or two sections at once
 * means exclusion failed. Fences are recorded inside the critical section, i.e. in grant order,
 * and must rise strictly.
 */
async function runExclusion(
  services: readonly LockService[],
  key: string,
  contenders: number,
  rounds: number,
): Promise<void> {
  let counter = 0;
  let inside = 0;
  let maxInside = 0;
  const fences: Array<number | null> = [];
  const tokens = new Set<string>();
  const notHeldInside: string[] = [];
  const critical = async (lock: Lock): Promise<void> => {
    inside += 1;
    maxInside = Math.max(maxInside, inside);
    if (!lock.isHeld()) notHeldInside.push(lock.token);
    fences.push(lock.fence);
    tokens.add(lock.token);
    const read = counter;
    await sleep(Math.random() * 3);
    counter = read + 1;
    inside -= 1;
  };
  const opts: LockOptions = { waitTimeout: 25_000 };
  await Promise.all(
    Array.from({ length: contenders }, async (_, i) => {
      const locks = services[i % services.length];
      for (let round = 0; round < rounds; round++) {
        if ((i + round) % 2 === 0) {
          await locks.withLock(key, critical, opts);
        } else {
          const lock = await locks.acquire(key, opts);
          try {
            await critical(lock);
          } finally {
            await lock.release();
          }
        }
      }
    }),
  );
  const sections = contenders * rounds;
  expect(maxInside).toBe(1);
  expect(counter).toBe(sections);
  expect(notHeldInside).toEqual([]);
  expect(tokens.size).toBe(sections);
  expect(fences).toHaveLength(sections);
  for (let i = 1; i < fences.length; i++) {
    expect(typeof fences[i]).toBe('number');
    expect(fences[i] as number).toBeGreaterThan(fences[i - 1] as number);
  }
  await Promise.all(services.map(async (s) => expect(await s.isLocked(key)).toBe(false)));
}

/** One holder at a time, whoever asks: clients of one app, of two apps, and a second try. */
export function mutualExclusion(f: LockFixture): void {
  describe('mutual exclusion', () => {
    it('serializes 8 concurrent clients x 3 rounds: no lost update, fences rise in grant order', async () => {
      await runExclusion([f.locks], f.newKey('excl'), 8, 3);
    }, 60_000);

    when(f.target.sharedAcrossApps === true)(
      'serializes contenders from two app instances sharing the store',
      async () => {
        const second = await f.newApp();
        try {
          await runExclusion([f.locks, second.locks], f.newKey('excl2'), 8, 3);
        } finally {
          await second.close();
        }
      },
      60_000,
    );

    it('a second client cannot take a held key; isLocked reports it', async () => {
      const key = f.newKey('held');
      await f.expectLocked(key, false);
      const a = await f.acquire(key);
      expect(a.isHeld()).toBe(true);
      expect(a.key).toBe(key);
      expect(a.keys).toEqual([key]);
      expect(a.backend).toBe(BACKEND);
      expect(typeof a.token).toBe('string');
      expect(a.token.length).toBeGreaterThanOrEqual(16);
      expect(a.signal.aborted).toBe(false);
      expect(await f.backend.isLocked(f.full(key))).toBe(true);
      await f.expectSoleHolder(a, key);
      await f.releaseFrees(a, key);
      expect(a.isHeld()).toBe(false);
      expect(a.signal.aborted).toBe(true);
    });
  });
}
