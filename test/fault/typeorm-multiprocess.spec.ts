import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { scratchTable, SQL_LOCK_PAIRS } from '../../servers/databases';
import { typeormOptions } from '../support/typeorm-backend';
import { judgeLockWorkers } from '../support/worker-pool';

const WORKERS = 8;
/** Sections per worker: 480 per configuration, every one of them contended by seven others. */
const ROUNDS = 60;

const wallTimes: string[] = [];
afterAll(() => {
  if (wallTimes.length > 0)
    console.log(`typeorm multiprocess wall times:\n${wallTimes.join('\n')}`);
});

describe(`typeorm: ${WORKERS} worker processes x ${ROUNDS} critical sections through @Locked on one key`, () => {
  for (const { strategy, kind } of SQL_LOCK_PAIRS) {
    it(`${strategy} on ${kind}: no overlap, numeric fences, exact witness counter`, async () => {
      const started = performance.now();
      const key = 'mp-counter';
      const keyPrefix = `mp-${strategy}-${kind}-${randomUUID()}:`;
      const table = scratchTable(kind, 'mp');
      // SQLite: one file shared by every worker; WAL and a generous busy timeout let 8
      // processes take turns writing it.
      const dataSource =
        kind === 'sqlite'
          ? { ...table.dataSourceOptions(), enableWAL: true, timeout: 10_000 }
          : table.dataSourceOptions({ poolSize: 4 });
      const options = typeormOptions(dataSource, strategy, table.name, keyPrefix);
      try {
        await judgeLockWorkers(
          {
            count: WORKERS,
            optionsFor: () => options,
            key,
            rounds: ROUNDS,
            holdMs: 1,
            via: 'decorator',
            timeoutMs: 110_000,
          },
          ({ events, final, result }) => {
            expect(result.violations).toEqual([]);
            expect(result.holds).toBe(WORKERS * ROUNDS);
            expect(result.criticalSections).toBe(WORKERS * ROUNDS);
            expect(final).toBe(WORKERS * ROUNDS);
            const fences = events
              .filter((e) => e.ev === 'acq')
              .map((e) => (e as { fence: number | null }).fence);
            expect(fences).toHaveLength(WORKERS * ROUNDS);
            expect(fences.every((f) => typeof f === 'number')).toBe(true);
          },
        );
      } finally {
        await table.drop();
        wallTimes.push(`  ${strategy} on ${kind}: ${Math.round(performance.now() - started)} ms`);
      }
    }, 120_000);
  }
});
