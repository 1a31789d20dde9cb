import type { Profile, SuiteOptions } from '../harness/profile';
import { fmt, target, type SuiteResult } from '../harness/result';
import type { SharingContender } from '../harness/sharing-contenders';
import { runSharingLoads, sharingSetup, type SharingResult } from '../harness/sharing-load';
import { sharingChart, sharingLabel, sharingStoreName } from '../harness/sharing-table';

/** Share of requests that write (issue 19, item 4: read-heavy). */
const WRITE_SHARE = 0.1;
/** A short critical section. */
const HOLD_MS = 2;

/**
 * Issue 19, item 4: a read-heavy load on one key (90% reads, 10% writes, 16 workers, 2 ms
 * holds) with the reads taken `mode: 'shared'`, against the very same load with every request
 * exclusive: on Redis, and on memory as the in-process reference (no round trips: what the
 * engine alone allows). Reads must scale: shared beats exclusive.
 */
export async function readWriteSuite(
  profile: Profile,
  options: SuiteOptions,
): Promise<SuiteResult> {
  const started = performance.now();
  const setup = sharingSetup(profile);
  const stores =
    options.sharingStore === 'redis' ? (['redis', 'memory'] as const) : (['memory'] as const);
  const contenders: SharingContender[] = stores.flatMap((store) =>
    [true, false].map((sharedReads): SharingContender => ({
      kind: 'ours',
      store,
      permits: 1,
      sharedReads,
    })),
  );
  const { runs, results } = await runSharingLoads(
    contenders,
    { holdMs: HOLD_MS, thinkMs: 0, writeShare: WRITE_SHARE },
    setup,
  );
  for (const r of results) {
    // A writer beside anyone, or two holders of a mutex, would void every figure.
    const unsafe = r.contender.kind === 'ours' && !r.contender.sharedReads && r.maxHolders > 1;
    if (r.writerOverlaps > 0 || unsafe) {
      throw new Error(
        `read-write, ${sharingLabel(r.contender)}: ${r.writerOverlaps} grants beside a write, ` +
          `${r.maxHolders} holders at once`,
      );
    }
  }
  // Runs come in (shared, exclusive) pairs per store, the target's store first.
  const ratio = (store: number): number =>
    results[2 * store].opsPerSec / results[2 * store + 1].opsPerSec;
  return {
    id: 'read-write',
    title: `Read-heavy load, shared reads vs all exclusive, ${setup.workers} workers`,
    tables: [
      {
        title: `One key, ${setup.workers} workers (over ${setup.processes} processes; memory: one), ${100 - WRITE_SHARE * 100}% reads / ${WRITE_SHARE * 100}% writes, hold ${HOLD_MS} ms, no think time`,
        columns: [
          'Lock',
          'locked ops/s',
          'of which writes/s',
          'shared ÷ exclusive',
          'wait p50 / p99 / max (ms)',
          'write wait p50 / p99 / max (ms)',
          'most holders at once',
        ],
        rows: results.map((r, i) => [
          sharingLabel(r.contender),
          fmt(r.opsPerSec),
          fmt(r.writesPerSec),
          i % 2 === 0 ? `${fmt(ratio(i / 2), 2)}×` : '1×',
          summaryCell(r.waitMs),
          summaryCell(r.writeWaitMs),
          String(r.maxHolders),
        ]),
        note:
          (setup.repeats > 1
            ? `Median of ${setup.repeats} runs of ${setup.durationMs / 1000} s each. `
            : `One run of ${setup.durationMs / 1000} s. `) +
          'Every worker asks again as soon as it released; a request is a write with ' +
          `probability ${WRITE_SHARE}. Writes are exclusive in both loads; with shared reads a ` +
          'waiting write blocks new reads (writer preference), so write waits stay bounded. ' +
          'No write was ever granted beside another holder (checked over every section).',
      },
    ],
    targets: [
      target(
        'read-write-shared-vs-exclusive',
        `Read-heavy on ${sharingStoreName(options)}: shared reads ÷ all exclusive (locked ops/s)`,
        ratio(0),
        '>',
        1,
        'x',
      ),
    ],
    charts: [
      sharingChart(
        'read-write',
        `Read-heavy load, ${setup.workers} workers (locked ops/s)`,
        results,
      ),
    ],
    data: { writeShare: WRITE_SHARE, holdMs: HOLD_MS, ...setup, runs },
    seconds: (performance.now() - started) / 1000,
  };
}

function summaryCell(s: SharingResult['waitMs']): string {
  return `${fmt(s.p50)} / ${fmt(s.p99)} / ${fmt(s.max)}`;
}
