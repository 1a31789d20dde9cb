import { HASH_SLOTS } from './port/key-slot';

/**
 * Fence counters are shared by buckets of keys, so the module's footprint in the store stays
 * bounded however many distinct keys are locked: a key's bucket is its lock name's Cluster hash
 * slot (on a Cluster the counter must share that slot, so scripts stay single-slot), reduced
 * modulo `fenceBuckets` on a single node. Every grant of a key draws its fence from the key's
 * bucket (see `drawFence` in `scripts/lua-base.ts`), so fences of one key still rise strictly;
 * other keys of the bucket only make the steps larger. The holder's own fence is kept in the lock
 * value (`<token> <fence>`).
 */

/** Default number of fence counters on a single Redis node (and on each Redlock node). */
export const DEFAULT_FENCE_BUCKETS = 4_096;
/** Largest useful `fenceBuckets`: a bucket is a hash slot reduced modulo the count. */
export const MAX_FENCE_BUCKETS = HASH_SLOTS;

/** The bucket of a lock whose slot is `slot`: the slot itself on a Cluster (`buckets` null). */
export function fenceBucket(slot: number, buckets: number | null): number {
  return buckets === null ? slot : slot % buckets;
}
