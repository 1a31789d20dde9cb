import type { ContendedResult } from './contended';
import { fmt, type BenchTable, type ChartSpec } from './result';

/** Display names of the contenders. */
export const CONTENDER_LABELS: Record<string, string> = {
  'ours-redis': 'ours (Redis)',
  redlock: 'redlock 4.2.0 (retryDelay 200 ms)',
  'redlock-universal': 'redlock-universal 0.8.5 (retryDelay 100 ms)',
  'redis-semaphore': 'redis-semaphore 5.8.0 (retryInterval 10 ms)',
  'ours-zookeeper': 'ours (ZooKeeper)',
  'raw-zookeeper': 'raw recipe (node-zookeeper-client)',
  'ours-pg-table': 'ours PostgreSQL table, notified (LISTEN/NOTIFY)',
  'ours-pg-table-polling': 'ours PostgreSQL table, polling (releaseNotifications: false)',
  'ours-pg-for-update': 'ours PostgreSQL for-update',
  'raw-pg-for-update': 'raw FOR UPDATE, PostgreSQL (BEGIN; SELECT … FOR UPDATE; COMMIT)',
  'ours-mariadb-for-update': 'ours MariaDB for-update',
  'raw-mariadb-for-update':
    'raw FOR UPDATE, MariaDB (START TRANSACTION; SELECT … FOR UPDATE; COMMIT)',
};

/**
 * Bar labels where the display name, shortened, would not fit a bar or tell two bars apart
 * (the SQL locks: database, strategy, how it waits).
 */
const BAR_LABELS: Record<string, string> = {
  'ours-pg-table': 'PG table, notified',
  'ours-pg-table-polling': 'PG table, polling',
  'ours-pg-for-update': 'PG for-update',
  'raw-pg-for-update': 'PG raw floor',
  'ours-mariadb-for-update': 'MariaDB for-update',
  'raw-mariadb-for-update': 'MariaDB raw floor',
};

/**
 * The contended hand-off table: throughput against the ideal, waits, idle gaps, fairness.
 * `roundTripMs`: the one store's round trip, or each lock's when the locks are on different
 * stores (then shown in a column, which the caller's `note` explains). Locks that counted their
 * statements get a column of statements per section.
 */
export function contendedTable(
  title: string,
  results: readonly ContendedResult[],
  roundTripMs: number | ((result: ContendedResult) => number),
  note: string,
): BenchTable {
  const perLock = typeof roundTripMs === 'function' ? roundTripMs : undefined;
  const statements = results.some((r) => r.statementsPerSection !== undefined);
  return {
    title,
    columns: [
      'Lock',
      ...(perLock ? ['round trip (ms)'] : []),
      'locked ops/s',
      'of ideal',
      'wait p50 / p99 / max (ms)',
      'idle gap p50 / p99 / max (ms)',
      ...(statements ? ['statements per section'] : []),
      'sections per worker (min–max)',
    ],
    rows: results.map((r) => [
      CONTENDER_LABELS[r.contender] ?? r.contender,
      ...(perLock ? [fmt(perLock(r))] : []),
      fmt(r.opsPerSec),
      fmt(r.fractionOfIdeal, 2),
      `${fmt(r.waitMs.p50)} / ${fmt(r.waitMs.p99)} / ${fmt(r.waitMs.max)}`,
      `${fmt(r.idleGapMs.p50)} / ${fmt(r.idleGapMs.p99)} / ${fmt(r.idleGapMs.max)}`,
      ...(statements ? [fmt(r.statementsPerSection ?? NaN)] : []),
      `${Math.min(...r.perWorker)}–${Math.max(...r.perWorker)}`,
    ]),
    note:
      `${note} Ideal = 1 / (measured mean hold + one round trip` +
      (typeof roundTripMs === 'number'
        ? ` of ${fmt(roundTripMs)} ms, the median PING/exists of an idle client). `
        : ', the lock’s own column). ') +
      'Idle gap = from the holder sending its release to the next holder receiving its grant.',
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
      label:
        BAR_LABELS[r.contender] ??
        (CONTENDER_LABELS[r.contender] ?? r.contender)
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
