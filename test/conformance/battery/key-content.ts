import { describe, expect, it } from '@jest/globals';
import { MAX_KEY_LENGTH } from '../../../lib/core/settings/validation';
import type { Lock } from '../../../lib/lock.interfaces';
import type { LockFixture } from './fixture';

/**
 * Whatever a valid key holds reaches the store as a distinct lock: the longest key allowed
 * (SQL key columns and ZooKeeper node names hash long keys) and any characters (Redis Cluster
 * hash tags, path separators, quotes, case).
 */
export function keyContent(f: LockFixture): void {
  describe('keys of any content', () => {
    it('accepts a key of exactly MAX_KEY_LENGTH characters', async () => {
      const key = f.newKey('max').padEnd(MAX_KEY_LENGTH, 'k');
      const lock = await f.acquire(key);
      expect(lock.key).toBe(key);
      await f.expectSoleHolder(lock, key);
      await f.releaseFrees(lock, key);
    });

    it('treats keys of any content as distinct locks (spaces, unicode, braces, slashes, quotes)', async () => {
      const base = f.newKey('content');
      const suffixes = [
        ' a b ',
        'ünï©ødé 🔒',
        '{tag}',
        '{tag}x',
        'a{b}c',
        '/x/../y',
        'q\'"`',
        '%2F',
        'A',
        'a',
        '\t',
      ];
      const keys = suffixes.map((s) => `${base}${s}`);
      const held: Lock[] = [];
      for (const key of keys) held.push(await f.acquire(key, { waitTimeout: 0 }));
      try {
        for (const [i, key] of keys.entries()) {
          expect(held[i].key).toBe(key);
          await f.expectLocked(key, true);
          expect(await f.locks.tryAcquire(key)).toBeNull();
        }
      } finally {
        for (const lock of held) await lock.release();
      }
      for (const key of keys) await f.expectLocked(key, false);
    });
  });
}
