import { describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { judgeLockWorkers } from '../support/worker-pool';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';

describe('redis: 8 worker processes x 200 critical sections through @Locked on one key', () => {
  it('shows no overlap, strictly increasing fences and an exact witness counter', async () => {
    const key = 'mp-counter';
    const keyPrefix = `mp-${randomUUID()}:`; // one namespace shared by all workers
    await judgeLockWorkers(
      {
        count: 8,
        optionsFor: () => ({
          backends: { redis: { type: 'redis', url: MACHINE_REDIS_URL } },
          keyPrefix,
        }),
        key,
        rounds: 200,
        holdMs: 1,
        ttl: 5_000,
        via: 'decorator',
        timeoutMs: 120_000,
      },
      ({ events, final, result }) => {
        expect(result.violations).toEqual([]);
        expect(result.holds).toBe(1600);
        expect(result.criticalSections).toBe(1600);
        expect(final).toBe(1600);
        const fences = events
          .filter((e) => e.ev === 'acq')
          .map((e) => (e as { fence: number | null }).fence);
        expect(fences.every((f) => typeof f === 'number')).toBe(true);
      },
    );
  }, 150_000);
});
