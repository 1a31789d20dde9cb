import { HASH_SLOTS, hashSlot } from './port/key-slot';

/**
 * Fence counters are shared by buckets of keys, so the module's footprint in the store stays
 * bounded however many distinct keys are locked: a key's bucket is its lock key's Cluster hash
 * slot (on a Cluster the counter must share that slot, so scripts stay single-slot), reduced
 * modulo `fenceBuckets` on a single node. Every grant of a key draws its fence from the key's
 * bucket with INCR, so fences of one key still rise strictly; other keys of the bucket only make
 * the steps larger. The holder's own fence is kept in the lock value (`<token> <fence>`).
 */

/** Default number of fence counters on a single Redis node (and on each Redlock node). */
export const DEFAULT_FENCE_BUCKETS = 4_096;
/** Largest useful `fenceBuckets`: a bucket is a hash slot reduced modulo the count. */
export const MAX_FENCE_BUCKETS = HASH_SLOTS;

/** Name of a bucket counter, after its hash tag: `{T}nestjs-distributed-lock:fence`. */
const COUNTER_NAMESPACE = 'nestjs-distributed-lock:fence';
/**
 * The bucket count the counters of a node were laid out for (single node and Redlock nodes;
 * a Cluster has one counter per slot and no such key): a grant refuses to draw a fence under
 * another count, and a new count is taken only after raising every new counter above the old.
 */
export const FENCE_BUCKETS_META = 'nestjs-distributed-lock:fence-buckets';

/**
 * The counter of bucket `bucket` (a hash slot, or a slot modulo the bucket count). Its hash tag
 * is the first base-36 number whose CRC16 slot is `bucket`, so on a Cluster the counter lives in
 * the slot of the lock keys it serves. The names are fixed by this search order: every instance
 * (and every version) must name a bucket alike, or fences of one key would come from two counters.
 */
export function fenceCounterName(bucket: number): string {
  return `{${slotTags()[bucket]}}${COUNTER_NAMESPACE}`;
}

/** The bucket of a lock key whose slot is `slot`: the slot itself on a Cluster (`buckets` null). */
export function fenceBucket(slot: number, buckets: number | null): number {
  return buckets === null ? slot : slot % buckets;
}

/**
 * The counter names of buckets 0 .. `count` - 1, in order (migrations between bucket counts
 * pass them to one script).
 */
export function fenceCounterNames(count: number): string[] {
  return Array.from({ length: count }, (_, bucket) => fenceCounterName(bucket));
}

let tags: readonly string[] | undefined;

/**
 * A hash tag per slot: searched once, lazily (about 160 000 CRC16s of 1-4 characters,
 * a few ms), then cached for the life of the process.
 */
function slotTags(): readonly string[] {
  if (!tags) {
    const found = new Array<string>(HASH_SLOTS);
    let missing = HASH_SLOTS;
    for (let i = 0; missing > 0; i++) {
      const tag = i.toString(36);
      const slot = hashSlot(tag);
      if (found[slot] === undefined) {
        found[slot] = tag;
        missing--;
      }
    }
    tags = found;
  }
  return tags;
}
