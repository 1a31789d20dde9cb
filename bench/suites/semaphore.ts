import type { Profile, SuiteOptions } from '../harness/profile';
import { redisRoundTripMs } from '../harness/redis-client';
import { fmt, target, type SuiteResult } from '../harness/result';
import type { SharingContender } from '../harness/sharing-contenders';
import { runSharingLoads, sharingSetup, type SharingResult } from '../harness/sharing-load';
import { sharingChart, sharingLabel, sharingStoreName } from '../harness/sharing-table';

/** Holders admitted at once (issue 19, item 4). */
const PERMITS = 4;
/** Each section's hold, alike for both locks. */
const HOLD_MS = 5;
/**
 * Each worker's pause between a release and its next request in the measured load: half the
 * hold, the shape issue 8 set for the contended mutex (hold 2 ms, think 1 ms), so a freed permit
 * goes to a waiter, as it does when requests come from many callers, rather than straight back
 * to the worker that freed it.
 */
const THINK_MS = HOLD_MS / 2;

/** A load's short name in labels. */
const shapeOf = (thinkMs: number): string =>
  thinkMs > 0 ? `think ${fmt(thinkMs)} ms` : 'back to back';

/**
 * Issue 19, item 4: a counted lock (`permits: 4`) taken by 16 workers on one key of Redis,
 * against redis-semaphore's `Semaphore` (limit 4) on the same Redis with the same hold, spread
 * over the same processes. Throughput against the ideal (4 holders all the time), waits, and the
 * safety both keep: the most holders seen at once. Two loads: the target's, where each worker
 * thinks half a hold between sections, and back to back, where each asks again the moment it
 * releases: there redis-semaphore's releaser takes its permit straight back (barging) while ours
 * hands it to the longest waiter, so that load shows what first-come order costs.
 */
export async function semaphoreSuite(
  profile: Profile,
  options: SuiteOptions,
): Promise<SuiteResult> {
  const started = performance.now();
  const setup = sharingSetup(profile);
  const roundTripMs = await redisRoundTripMs();
  const contenders: SharingContender[] = [
    { kind: 'ours', store: options.sharingStore, permits: PERMITS, sharedReads: false },
    { kind: 'redis-semaphore', permits: PERMITS },
  ];
  const measured = await runSharingLoads(
    contenders,
    { holdMs: HOLD_MS, thinkMs: THINK_MS, writeShare: 1 },
    setup,
  );
  const backToBack = await runSharingLoads(
    contenders,
    { holdMs: HOLD_MS, thinkMs: 0, writeShare: 1 },
    setup,
  );
  const runs = [...measured.runs, ...backToBack.runs];
  const results = [...measured.results, ...backToBack.results];
  const [ours, peer] = measured.results;
  const [oursBackToBack, peerBackToBack] = backToBack.results;
  // Ours must be safe, or its figures mean nothing; the peer's safety is reported, not assumed.
  for (const r of [ours, oursBackToBack]) {
    if (r.maxHolders > PERMITS) {
      throw new Error(`semaphore: ${r.maxHolders} holders at once with permits ${PERMITS}`);
    }
  }
  const storeRoundTrip = (r: SharingResult): number =>
    r.contender.kind === 'ours' && r.contender.store === 'memory' ? 0 : roundTripMs;
  const ideal = (r: SharingResult): number => (PERMITS * 1000) / (r.meanHoldMs + storeRoundTrip(r));
  return {
    id: 'semaphore',
    title: `Counted lock (permits ${PERMITS}) on ${sharingStoreName(options)}, ${setup.workers} workers`,
    tables: [
      {
        title: `Counted lock on one key: permits ${PERMITS}, ${setup.workers} workers, hold ${HOLD_MS} ms, think ${fmt(THINK_MS)} ms (and back to back)`,
        columns: [
          'Lock',
          'load',
          'processes',
          'locked ops/s',
          'of ideal',
          'wait p50 / p99 / max (ms)',
          'most holders at once',
          'sections per worker (min–max)',
        ],
        rows: results.map((r) => [
          sharingLabel(r.contender),
          shapeOf(r.thinkMs),
          String(r.processes),
          fmt(r.opsPerSec),
          fmt(r.opsPerSec / ideal(r), 2),
          `${fmt(r.waitMs.p50)} / ${fmt(r.waitMs.p99)} / ${fmt(r.waitMs.max)}`,
          String(r.maxHolders),
          `${r.minPerWorker}–${r.maxPerWorker}`,
        ]),
        note:
          (setup.repeats > 1
            ? `Median of ${setup.repeats} runs of ${setup.durationMs / 1000} s each. `
            : `One run of ${setup.durationMs / 1000} s. `) +
          `Ideal = ${PERMITS} / (measured mean hold + one round trip of ${fmt(roundTripMs)} ms, ` +
          'the median PING of an idle client; none in memory). Most holders at once: counted ' +
          'over the whole run from each section’s [granted, release sent], which lies inside the ' +
          `true hold, so a figure above ${PERMITS} would be a real over-admission. ` +
          `Think ${fmt(THINK_MS)} ms (the target's load): each worker pauses half a hold between ` +
          'a release and its next request, so a freed permit goes to a waiter, not back to its ' +
          'releaser, and the key still has waiters (see the waits). Back to back: each worker ' +
          'asks again the moment it releases; redis-semaphore’s releaser then takes its permit ' +
          'straight back (barging, hence its spread of sections per worker) while ours hands it ' +
          'to the next in the key’s queue: ' +
          `ours ÷ redis-semaphore ${fmt(oursBackToBack.opsPerSec / peerBackToBack.opsPerSec, 3)}× ` +
          'there, what first-come order and a fence per grant cost against barging.',
      },
    ],
    targets: [
      target(
        'semaphore-vs-redis-semaphore',
        `Counted lock (permits ${PERMITS}) on ${sharingStoreName(options)}, think ${fmt(THINK_MS)} ms: ours ÷ redis-semaphore Semaphore (locked ops/s)`,
        ours.opsPerSec / peer.opsPerSec,
        '>=',
        1,
        'x',
      ),
      target(
        'semaphore-max-holders',
        `Counted lock: most holders at once, ours and redis-semaphore (permits ${PERMITS})`,
        Math.max(...results.map((r) => r.maxHolders)),
        '<=',
        PERMITS,
        'holders',
      ),
    ],
    charts: [
      sharingChart(
        'semaphore',
        `Counted lock, permits ${PERMITS}, ${setup.workers} workers (locked ops/s)`,
        results,
        (r) => `, ${shapeOf(r.thinkMs)}`,
      ),
    ],
    data: { roundTripMs, permits: PERMITS, holdMs: HOLD_MS, thinkMs: THINK_MS, ...setup, runs },
    seconds: (performance.now() - started) / 1000,
  };
}
