import { afterAll, describe, expect, it } from '@jest/globals';
import { judgeLockWorkers } from '../support/worker-pool';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';

afterAll(() => stopAllZk());

describe('zookeeper: 8 worker processes x 100 critical sections through @Locked on one key', () => {
  it('shows no overlap, strictly increasing fences and an exact witness counter', async () => {
    const zk = await startZkStandalone();
    const key = 'mp-counter';
    try {
      await judgeLockWorkers(
        {
          count: 8,
          optionsFor: () => ({
            backends: {
              zk: { type: 'zookeeper', connectionString: zk.connectString, sessionTimeout: 4_000 },
            },
          }),
          key,
          rounds: 100,
          holdMs: 1,
          via: 'decorator',
          timeoutMs: 150_000,
        },
        ({ final, result }) => {
          expect(result.violations).toEqual([]);
          expect(result.holds).toBe(800);
          expect(final).toBe(800);
        },
      );
    } finally {
      await zk.destroy();
    }
  }, 180_000);
});
