import { handoffFor, runHandoffs } from '../harness/contended';
import { contendedChart, contendedTable } from '../harness/contended-table';
import { WAIT_MS, type ContenderName } from '../harness/contenders';
import type { Profile } from '../harness/profile';
import { target, type SuiteResult } from '../harness/result';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { redisRoundTripMs } from '../harness/redis-client';

const CONTENDERS: ContenderName[] = [
  'ours-redis',
  'redis-semaphore',
  'redlock',
  'redlock-universal',
];

/** The peers' target ids and labels, in {@link CONTENDERS} order after ours. */
const PEERS: ReadonlyArray<{ id: string; label: string }> = [
  { id: 'redis-contended-vs-semaphore', label: 'redis-semaphore' },
  { id: 'redis-contended-vs-redlock', label: 'redlock' },
  { id: 'redis-contended-vs-redlock-universal', label: 'redlock-universal' },
];

/** How the peers wait: each at its own default retry pace, none giving up within a run. */
const PEER_SETTINGS =
  ' Each worker of a peer talks through one ioredis client; the peers keep their default ' +
  'retry pace and are only told to wait long enough: redis-semaphore polls every 10 ms ' +
  `(acquireTimeout ${WAIT_MS / 1000} s), redlock 4.2 every 200 ms + up to 200 ms jitter ` +
  '(retryCount -1: unbounded), redlock-universal every 100 ms, no jitter (retryAttempts ' +
  `${WAIT_MS / 100}: at least ${WAIT_MS / 1000} s).`;

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
        (repeats > 1
          ? `Median of ${repeats} runs of ${profile.contendedMs / 1000} s each.`
          : `One run of ${profile.contendedMs / 1000} s.`) + PEER_SETTINGS,
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
      ...PEERS.map(({ id, label }, i) =>
        target(
          id,
          `Contended Redis: ours ÷ ${label} (locked ops/s)`,
          ours.opsPerSec / results[i + 1].opsPerSec,
          '>=',
          1.1,
          'x',
        ),
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
