import { describe, expect, it } from '@jest/globals';
import type { LockFixture } from './fixture';

/**
 * Fencing tokens: every target fences (`ConformanceTarget.capabilities.fencing` is `true`);
 * fences rising under contention and across a takeover are checked by the exclusion and
 * lease-lifetime cases.
 */
export function fencing(f: LockFixture): void {
  describe('fencing', () => {
    it('sequential grants carry strictly increasing fences', async () => {
      const key = f.newKey('fence');
      const fences: Array<number | null> = [];
      const tokens = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const lock = await f.acquire(key);
        fences.push(lock.fence);
        expect(lock.fences).toEqual([lock.fence]);
        tokens.add(lock.token);
        await lock.release();
      }
      expect(tokens.size).toBe(5);
      for (const fence of fences) expect(Number.isSafeInteger(fence)).toBe(true);
      for (let i = 1; i < fences.length; i++) {
        expect(fences[i] as number).toBeGreaterThan(fences[i - 1] as number);
      }
    });
  });
}
