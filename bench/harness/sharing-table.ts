import type { ChartSpec } from './result';
import type { SuiteOptions } from './profile';
import type { SharingContender } from './sharing-contenders';
import type { SharingResult } from './sharing-load';

/** Display name of a sharing contender: which lock, on which store, how it admits. */
export function sharingLabel(contender: SharingContender): string {
  if (contender.kind === 'redis-semaphore') {
    return `redis-semaphore 5.8.0 Semaphore (limit ${contender.permits}, retryInterval 10 ms)`;
  }
  const store = contender.store === 'redis' ? 'Redis' : 'memory';
  if (contender.permits > 1) return `ours (${store}, permits ${contender.permits})`;
  return `ours (${store}, ${contender.sharedReads ? "reads mode 'shared'" : 'every request exclusive'})`;
}

/**
 * Where ours ran, for titles and target labels: a run on memory (`--sharing-store memory`) must
 * never pass for one on Redis.
 */
export function sharingStoreName(options: SuiteOptions): string {
  return options.sharingStore === 'redis' ? 'Redis' : 'memory (in-process reference)';
}

/**
 * Bars of locked operations per second, one per run; `labelOf` adds to a bar's label what tells
 * runs of one contender apart (the load they ran).
 */
export function sharingChart(
  id: string,
  title: string,
  results: readonly SharingResult[],
  labelOf: (r: SharingResult) => string = () => '',
): ChartSpec {
  return {
    id,
    title,
    valueTitle: 'locked ops/s',
    points: results.map((r) => ({
      // Short bar labels: no settings, no versions (the table has them).
      label:
        sharingLabel(r.contender)
          .replace(/ \(limit.*\)$/, '')
          .replace(/ 5\.8\.0/, '') + labelOf(r),
      group: r.contender.kind === 'ours' ? 'ours' : 'peer',
      value: Math.round(r.opsPerSec),
    })),
  };
}
