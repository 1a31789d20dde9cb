import { describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { checkHistory, readHistory } from '../support/history';
import { runLockWorkers } from '../support/worker-pool';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('redis: 8 worker processes x 200 critical sections through @Locked on one key', () => {
  it('shows no overlap, strictly increasing fences and an exact witness counter', async () => {
    const key = 'mp-counter';
    const keyPrefix = `mp-${randomUUID()}:`; // one namespace shared by all workers
    const run = await runLockWorkers({
      count: 8,
      optionsFor: () => ({ backends: { redis: { type: 'redis', url: REDIS_URL } }, keyPrefix }),
      key,
      rounds: 200,
      holdMs: 1,
      ttl: 5_000,
      via: 'decorator',
      timeoutMs: 120_000,
    });
    try {
      const events = readHistory(run.historyFiles);
      const final = Number(readFileSync(run.witnessFile, 'utf8'));
      const result = checkHistory(events, { witnessFinal: { [key]: final } });
      expect(result.violations).toEqual([]);
      expect(result.holds).toBe(1600);
      expect(result.criticalSections).toBe(1600);
      expect(final).toBe(1600);
      const fences = events
        .filter((e) => e.ev === 'acq')
        .map((e) => (e as { fence: number | null }).fence);
      expect(fences.every((f) => typeof f === 'number')).toBe(true);
    } finally {
      run.cleanup();
    }
  }, 150_000);
});
