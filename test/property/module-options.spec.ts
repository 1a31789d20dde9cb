import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Outcome } from './call-checks';
import { checkModuleCase } from './module-checks';
import { moduleCase } from './module-inputs';

/** Configurations tried (each boots and closes a Nest application). */
const RUNS = 2_000;

describe('bad input at volume: LockModule.forRoot options', () => {
  it('any options boot a working module or are refused with LockConfigError before any backend exists', async () => {
    const outcomes = new Map<Outcome, number>();
    const startedAt = performance.now();
    await fc.assert(
      fc.asyncProperty(moduleCase, async (c) => {
        const outcome = await checkModuleCase(c);
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }),
      { numRuns: RUNS },
    );
    console.log(
      `bad input at volume, LockModule.forRoot: ${RUNS} configurations in ${((performance.now() - startedAt) / 1000).toFixed(1)} s (${[...outcomes].map(([o, n]) => `${n} ${o}`).join(', ')})`,
    );
    expect(outcomes.get('worked') ?? 0).toBeGreaterThan(RUNS * 0.1);
    expect(outcomes.get('refused') ?? 0).toBeGreaterThan(RUNS * 0.1);
  }, 120_000);
});
