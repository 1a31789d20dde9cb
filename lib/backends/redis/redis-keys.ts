import { createHash, hash } from 'node:crypto';
import { hashSlot } from './port/key-slot';
import { FENCE_BUCKETS_META, fenceBucket, fenceCounterName } from './fence-buckets';

/** The Redis names used for one lock key. */
export interface RedisLockNames {
  readonly lock: string;
  /** The lock key's Cluster hash slot (CRC16 of its hash tag): picks its fence bucket. */
  readonly slot: number;
  /**
   * The per-key fence counter of versions before fence buckets (`<lock>:fence`). No longer
   * written: a grant raises the key's bucket to it and deletes it (upgrade carry-over).
   */
  readonly legacyFence: string;
  /** Sorted set of waiting tokens, by arrival (FIFO hand-off). */
  readonly queue: string;
  /** Sorted set of waiting tokens, by the server time their place lapses. */
  readonly waiters: string;
  /** Arrival counter that orders `queue`. */
  readonly arrivals: string;
}

/**
 * Redis names for a (prefixed) lock key. All of them start with a hash tag derived from a digest
 * of the key, so they share a Cluster slot (and so does the key's fence bucket counter, see
 * `fence-buckets.ts`), and braces in the user's key can never pick the slot (Redis uses the
 * first `{...}` only, which is ours). The names are those of earlier versions, so old and new
 * instances running side by side during an upgrade still exclude each other.
 */
export function redisLockNames(fullKey: string): RedisLockNames {
  let names = recent.get(fullKey);
  if (!names) {
    const tag = tagOf(fullKey);
    const lock = `{${tag}}${fullKey}`;
    names = {
      lock,
      slot: hashSlot(tag),
      legacyFence: `${lock}:fence`,
      queue: `${lock}:queue`,
      waiters: `${lock}:waiters`,
      arrivals: `${lock}:arrivals`,
    };
    if (recent.size >= RECENT_MAX) recent.clear();
    recent.set(fullKey, names);
  }
  return names;
}

/**
 * The keys the queue scripts take, in their KEYS order: lock, fence bucket counter, queue,
 * waiter expiries, legacy per-key counter, arrivals, and on a single node (`count` buckets) the
 * bucket-count key (on a Cluster, `count` null: every key is in the lock key's slot).
 */
export function queueScriptKeys(names: RedisLockNames, count: number | null): string[] {
  const keys = [
    names.lock,
    fenceCounterName(fenceBucket(names.slot, count)),
    names.queue,
    names.waiters,
    names.legacyFence,
    names.arrivals,
  ];
  if (count !== null) keys.push(FENCE_BUCKETS_META);
  return keys;
}

/**
 * Just the lock's name and slot, for batched renewals: tens of thousands of held keys a tick
 * would only churn the small cache of recent keys, and building all of a key's names each time
 * was the largest share of a renewal tick's CPU. (`slot` only when asked: a Cluster groups by it.)
 */
export function lockNameOf(fullKey: string): string {
  return recent.get(fullKey)?.lock ?? `{${tagOf(fullKey)}}${fullKey}`;
}

/** The slot of a lock name made by {@link lockNameOf} (CRC16 of its hash tag). */
export function slotOfLockName(lock: string): number {
  return hashSlot(lock.slice(1, lock.indexOf('}')));
}

/** The hash tag of a key: a SHA-1 of it (one-shot `crypto.hash`, cheaper than a Hash object). */
function tagOf(fullKey: string): string {
  return hash('sha1', fullKey, 'base64url');
}

/**
 * The lock key whose legacy per-key fence counter `name` is (`{sha1(key)}key:fence`), or
 * undefined when `name` is not one (a user's key that merely ends in `:fence`).
 */
export function legacyFenceOwner(name: string): string | undefined {
  if (!name.startsWith('{') || !name.endsWith(':fence')) return undefined;
  const end = name.indexOf('}');
  if (end < 0) return undefined;
  const fullKey = name.slice(end + 1, -':fence'.length);
  const tag = createHash('sha1').update(fullKey).digest('base64url');
  return name.slice(1, end) === tag ? fullKey : undefined;
}

/** Names of recently used keys: a cycle needs them twice (acquire, release), a SHA-1 each time. */
const recent = new Map<string, RedisLockNames>();
const RECENT_MAX = 1_000;
