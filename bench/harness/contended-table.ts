import type { ContendedResult } from './contended';
import { fmt, type BenchTable, type ChartSpec } from './result';

/** Display names of the contenders. */
export const CONTENDER_LABELS: Record<string, string> = {
  'ours-redis': 'ours (Redis)',
  redlock: 'redlock 4.2.0 (retryDelay 200 ms)',
  'redis-semaphore': 'redis-semaphore 5.8.0 (retryInterval 10 ms)',
  'ours-zookeeper': 'ours (ZooKeeper)',
  'raw-zookeeper': 'raw recipe (node-zookeeper-client)',
};

/** The contended hand-off table: throughput against the ideal, waits, idle gaps, fairness. */
export function contendedTable(
  title: string,
  results: readonly ContendedResult[],
  roundTripMs: number,
  note: string,
): BenchTable {
  return {
    title,
    columns: [
      'Lock',
      'locked ops/s',
      'of ideal',
      'wait p50 / p99 / max (ms)',
      'idle gap p50 / p99 (ms)',
      'sections per worker (min–max)',
    ],
    rows: results.map((r) => [
      CONTENDER_LABELS[r.contender] ?? r.contender,
      fmt(r.opsPerSec),
      fmt(r.fractionOfIdeal, 2),
      `${fmt(r.waitMs.p50)} / ${fmt(r.waitMs.p99)} / ${fmt(r.waitMs.max)}`,
      `${fmt(r.idleGapMs.p50)} / ${fmt(r.idleGapMs.p99)}`,
      `${Math.min(...r.perWorker)}–${Math.max(...r.perWorker)}`,
    ]),
    note:
      `${note} Ideal = 1 / (measured mean hold + one round trip of ${fmt(roundTripMs)} ms, ` +
      'the median PING/exists of an idle client). Idle gap = from the holder sending its ' +
      'release to the next holder receiving its grant.',
  };
}

/** Bars of locked operations per second, one per contender. */
export function contendedChart(
  id: string,
  title: string,
  results: readonly ContendedResult[],
): ChartSpec {
  return {
    id,
    title,
    valueTitle: 'locked ops/s',
    points: results.map((r) => ({
      // Short bar labels: no settings, no versions (the table has them).
      label: (CONTENDER_LABELS[r.contender] ?? r.contender)
        .replace(/ \(.*\)$/, '')
        .replace(/ \d[\d.]*$/, ''),
      group: r.contender.startsWith('ours')
        ? 'ours'
        : r.contender.startsWith('raw')
          ? 'floor'
          : 'peer',
      value: Math.round(r.opsPerSec),
    })),
  };
}
