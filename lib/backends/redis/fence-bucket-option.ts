import { LockConfigError } from '../../errors/lock.errors';
import { describe } from '../../core/shared/options';
import { MAX_FENCE_BUCKETS } from './fence-buckets';

/**
 * `fenceBuckets` (a single Redis node, each Redlock node): how many fence counters the store
 * keeps, an integer from 1 to 16384 (a bucket is a hash slot modulo the count, so more is
 * pointless). Fewer counters mean fewer keys, and larger steps between one key's fences.
 */
export function checkFenceBuckets(value: unknown, field: string): void {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_FENCE_BUCKETS) {
    throw new LockConfigError(
      field,
      `must be an integer from 1 to ${MAX_FENCE_BUCKETS} (the number of fence counters kept in the store), got ${describe(value)}`,
    );
  }
}
