import { hash } from 'node:crypto';
import { HASH_SLOTS, hashSlot, keySlot } from './port/key-slot';

/** The Redis names of one lock key. */
export interface RedisLockNames {
  /** The lock: a mutex's string, or the hash of shared and counted holders. */
  readonly lock: string;
  /** The lock's Cluster hash slot (Redis's rule on the whole name): picks its fence bucket. */
  readonly slot: number;
  /** Sorted set of waiting members, by arrival (FIFO hand-off). */
  readonly queue: string;
  /** Sorted set of waiting members, by the server time their place lapses. */
  readonly waiters: string;
  /** Arrival counter that orders `queue`. */
  readonly arrivals: string;
  /**
   * The KEYS of this lock's scripts under one bucket count, made once (see
   * `RedisStore.keysOf`): a cycle sends them twice, and arrays built for every call were a share
   * of its client time.
   */
  /**
   * This process last found the key held or awaited (a lean attempt missed, a lean release found
   * waiters), and has not taken it the lean way since: its next release goes straight to the
   * general script, which hands it on (the lean one would only send it there, a round trip more
   * on every contended hand-off).
   */
  contended?: boolean;
  scriptKeys?: {
    /** The bucket count they were made for (`null`: a Cluster's, one counter per slot). */
    readonly count: number | null;
    /** Every name: lock, queue, counter, waiters, arrivals. */
    readonly all: readonly string[];
    /** The first three (the lean acquire's). */
    readonly lean: readonly string[];
    /** The lock alone (the lean release's). */
    readonly lock: readonly string[];
  };
}

/** What the module writes in Redis besides locks, after the prefix. */
const NAMESPACE = 'nestjs-distributed-lock';
/** Names of recently used keys kept (a cycle needs them twice, a SHA-1 each time). */
const RECENT_MAX = 1_000;
/**
 * Characters of a lock's hash tag (base64url of its key's SHA-1: 66 bits). The tag only has to
 * put a lock's names in one slot and keep the user's braces out of the slot: the names differ by
 * the key after it. A tag collision between a key and that key plus `:queue` (2^-66) is the only
 * way two locks' names could meet. Every name is sent with every script call, so shorter is
 * cheaper.
 */
const TAG_LENGTH = 11;

/**
 * Every Redis name the module uses under one `keyPrefix`, so that a Redis user whose ACL allows
 * only `~<prefix>*` (and `&<prefix>*` for the wake-up channels) can lock:
 * - a lock: `<prefix>{<tag>}<key>` and its `:queue`, `:waiters`, `:arrivals`. The tag is from a
 *   SHA-1 of the prefixed key, so a lock's names share a Cluster slot, and braces in the key can
 *   never pick the slot (Redis uses the first `{...}`: ours, unless the prefix has one of its own,
 *   which then puts every lock in the prefix's slot);
 * - fence bucket counters: `<prefix>{<T>}nestjs-distributed-lock:fence`, `T` the shortest text
 *   whose slot is the bucket's (see `fence-buckets.ts`); a lock's tag is 11 characters, so no
 *   key's name is ever a counter's;
 * - wake-up channels: `<prefix>nestjs-distributed-lock:waiters:<random>`.
 */
export class RedisKeyspace {
  private readonly recent = new Map<string, RedisLockNames>();

  constructor(
    /** The module's `keyPrefix`: every key reaching the backend starts with it. */
    readonly prefix: string,
  ) {}

  /** The names of a lock key (prefix included, as the backend receives it). */
  names(fullKey: string): RedisLockNames {
    let names = this.recent.get(fullKey);
    if (!names) {
      const lock = this.lockName(fullKey);
      names = {
        lock,
        slot: keySlot(lock),
        queue: `${lock}:queue`,
        waiters: `${lock}:waiters`,
        arrivals: `${lock}:arrivals`,
      };
      if (this.recent.size >= RECENT_MAX) this.recent.clear();
      this.recent.set(fullKey, names);
    }
    return names;
  }

  /**
   * Just the lock's name, for batched renewals: tens of thousands of held keys a tick would only
   * churn the small cache of recent keys.
   */
  lockName(fullKey: string): string {
    const cached = this.recent.get(fullKey);
    if (cached) return cached.lock;
    const rest = fullKey.startsWith(this.prefix) ? fullKey.slice(this.prefix.length) : fullKey;
    return `${this.prefix}{${hash('sha1', fullKey, 'base64url').slice(0, TAG_LENGTH)}}${rest}`;
  }

  /** The counter of fence bucket `bucket` (see `fence-buckets.ts`). */
  counter(bucket: number): string {
    return `${this.prefix}{${slotTags()[bucket]}}${NAMESPACE}:fence`;
  }

  /** The counters of buckets 0 .. `count` - 1, in order. */
  counters(count: number): string[] {
    return Array.from({ length: count }, (_, bucket) => this.counter(bucket));
  }

  /** A wake-up channel's name for this process's `id`. */
  channel(id: string): string {
    return `${this.prefix}${NAMESPACE}:waiters:${id}`;
  }
}

let tags: readonly string[] | undefined;

/**
 * A hash tag per slot, the first base-36 number whose CRC16 slot it is: searched once, lazily
 * (about 160 000 CRC16s of 1-4 characters, a few ms), then kept for the life of the process. The
 * names are fixed by this search order: every instance must name a bucket alike, or fences of
 * one key would come from two counters.
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
