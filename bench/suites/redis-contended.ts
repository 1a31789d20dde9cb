import { handoffFor, runHandoffs } from '../harness/contended';
import { contendedChart, contendedTable } from '../harness/contended-table';
import type { ContenderName } from '../harness/contenders';
import type { Profile } from '../harness/profile';
import { target, type SuiteResult } from '../harness/result';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { redisRoundTripMs } from '../harness/redis-client';

const CONTENDERS: ContenderName[] = ['ours-redis', 'redis-semaphore', 'redlock'];

/**
 * Issue 8, item 2: one key, 8 worker processes, each holding 2 ms and thinking 1 ms between
 * sections. Measures how close each lock comes to the ideal hand-off (the next holder granted
 * one round trip after a release), how long waiters wait, and how fair the queue is.
 */
export async function redisContendedSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const roundTripMs = await redisRoundTripMs();
  const handoff = handoffFor(profile);
  const { runs, results, repeats } = await runHandoffs(
    CONTENDERS,
    { redisUrl: MACHINE_REDIS_URL },
    roundTripMs,
    handoff,
  );
  const ours = results[0];
  const maxWaitBound = 2 * handoff.workers * (ours.meanHoldMs + roundTripMs);
  return {
    id: 'redis-contended',
    title: `Contended hand-off on Redis, ${handoff.workers} processes`,
    tables: [
      contendedTable(
        `Contended hand-off on Redis: ${handoff.workers} worker processes, one key, hold ${handoff.holdMs} ms, think ${handoff.thinkMs} ms`,
        results,
        roundTripMs,
        repeats > 1
          ? `Median of ${repeats} runs of ${profile.contendedMs / 1000} s each.`
          : `One run of ${profile.contendedMs / 1000} s.`,
      ),
    ],
    targets: [
      target(
        'redis-contended-ideal',
        'Contended Redis: locked ops/s ÷ ideal',
        ours.fractionOfIdeal,
        '>=',
        0.85,
        'x',
      ),
      target(
        'redis-contended-max-wait',
        `Contended Redis: max wait (bound 2 × ${handoff.workers} × (hold + round trip))`,
        ours.waitMs.max,
        '<=',
        maxWaitBound,
        'ms',
      ),
      target(
        'redis-contended-vs-semaphore',
        'Contended Redis: ours ÷ redis-semaphore (locked ops/s)',
        ours.opsPerSec / results[1].opsPerSec,
        '>=',
        1,
        'x',
      ),
      target(
        'redis-contended-vs-redlock',
        'Contended Redis: ours ÷ redlock (locked ops/s)',
        ours.opsPerSec / results[2].opsPerSec,
        '>=',
        1,
        'x',
      ),
    ],
    charts: [
      contendedChart(
        'redis-contended',
        `Contended Redis hand-off, ${handoff.workers} processes (locked ops/s)`,
        results,
      ),
    ],
    data: {
      roundTripMs,
      ...handoff,
      runs,
    },
    seconds: (performance.now() - started) / 1000,
  };
}
