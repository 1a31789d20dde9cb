import { describe, expect, it } from '@jest/globals';
import { BACKEND, type LockFixture } from './fixture';

/** The store answers a health check; bad health options are the engine's (test/core). */
export function health(f: LockFixture): void {
  describe('health', () => {
    it('health() pings the store: up with a latency', async () => {
      await expect(f.backend.ping()).resolves.toBeUndefined();
      const report = await f.locks.health({ timeout: 2_000 });
      expect(Object.keys(report)).toEqual([BACKEND]);
      expect(report[BACKEND]).toEqual({ status: 'up', latencyMs: expect.any(Number) });
      expect(report[BACKEND].latencyMs).toBeLessThan(2_000);
    });
  });
}
