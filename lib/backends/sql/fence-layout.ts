import { storedKey } from './sql-dialect';

/*
 * Where fences come from, for every strategy: a fixed set of counter rows ("buckets") in the
 * lock table, each shared by the keys whose stored key falls in it. A grant draws
 * fence = ++counter[bucket(key)] atomically with the grant, under a lock that serialises the
 * grants of that key, so the draws of one key are in grant order and rise strictly, while the
 * rows kept stay bounded by the bucket count (not by the number of keys ever locked).
 *
 * Reserved rows have stored keys that begin with `~`, which no SHA-256 hex digest (the stored
 * key of a lock key) can: `~fence:meta` (the layout: bucket count, and in `fence` the floor
 * every bucket is created at) and `~fence:bucket:<i>`.
 */

/** Default number of fence buckets (`fenceBuckets`). */
export const DEFAULT_FENCE_BUCKETS = 4_096;
/** Largest `fenceBuckets`: a bucket is picked from 32 bits of the key's digest. */
export const MAX_FENCE_BUCKETS = 1_048_576;

/** First character of every reserved stored key (never a hex digit). */
export const RESERVED_PREFIX = '~';
/** SQL condition: the row is a lock key's (not a reserved fence row). */
export const KEY_ROW = `lock_key NOT LIKE '${RESERVED_PREFIX}%'`;
/** Stored key of the layout row. */
export const META_KEY = `${RESERVED_PREFIX}fence:meta`;
/** Stored key prefix of the bucket rows. */
const BUCKET_PREFIX = `${RESERVED_PREFIX}fence:bucket:`;
/** SQL condition: the row is a bucket counter. */
export const BUCKET_ROW = `lock_key LIKE '${BUCKET_PREFIX}%'`;
/** `key_text` of the layout row: names the layout and its bucket count (read back at startup). */
const META_TEXT = /^nestjs-distributed-lock fence layout v2; buckets=(\d+)$/;

/** The fence buckets of one backend: how keys map to counter rows. */
export class FenceLayout {
  constructor(
    /** Number of buckets (`fenceBuckets`). */
    readonly buckets: number,
  ) {}

  /** The bucket of `key`: the first 32 bits of its stored key (hex), modulo the bucket count. */
  bucketOf(key: string): number {
    return bucketOfStoredKey(storedKey(key), this.buckets);
  }

  /** The stored key of `key`'s bucket row. */
  bucketKeyOf(key: string): string {
    return bucketKey(this.bucketOf(key));
  }

  /** `key_text` of the layout row for this layout. */
  get metaText(): string {
    return `nestjs-distributed-lock fence layout v2; buckets=${this.buckets}`;
  }
}

/** The bucket of a key row's stored key (SHA-256 hex) among `buckets`. */
export function bucketOfStoredKey(stored: string, buckets: number): number {
  return Number.parseInt(stored.slice(0, 8), 16) % buckets;
}

/** The stored key of bucket `index`. */
export function bucketKey(index: number): string {
  return `${BUCKET_PREFIX}${index}`;
}

/** `key_text` of bucket `index` (for people reading the table). */
export function bucketText(index: number): string {
  return `fence counter ${index}`;
}

/** The index of a bucket row from its stored key (CHAR columns may come back space-padded). */
export function bucketIndexOf(stored: string): number | undefined {
  const text = stored.trim();
  if (!text.startsWith(BUCKET_PREFIX)) return undefined;
  const index = Number(text.slice(BUCKET_PREFIX.length));
  return Number.isSafeInteger(index) && index >= 0 ? index : undefined;
}

/** The bucket count a layout row's `key_text` records, or `undefined` if it is not one of ours. */
export function bucketsOfMetaText(text: unknown): number | undefined {
  const match = typeof text === 'string' ? META_TEXT.exec(text) : null;
  return match ? Number(match[1]) : undefined;
}
