import { createHash } from 'node:crypto';

/** The Redis names used for one lock key. */
export interface RedisLockNames {
  readonly lock: string;
  readonly fence: string;
  /** Sorted set of waiting tokens, by arrival (FIFO hand-off). */
  readonly queue: string;
  /** Sorted set of waiting tokens, by the server time their place lapses. */
  readonly waiters: string;
  /** Arrival counter that orders `queue`. */
  readonly arrivals: string;
}

/**
 * Redis names for a (prefixed) lock key. All of them start with a hash tag derived from a digest
 * of the key, so the lock and its fence counter always share a Cluster slot, and braces in the
 * user's key can never pick the slot (Redis uses the first `{...}` only, which is ours).
 */
export function redisLockNames(fullKey: string): RedisLockNames {
  let names = recent.get(fullKey);
  if (!names) {
    const tag = createHash('sha1').update(fullKey).digest('base64url');
    const lock = `{${tag}}${fullKey}`;
    names = {
      lock,
      fence: `${lock}:fence`,
      queue: `${lock}:queue`,
      waiters: `${lock}:waiters`,
      arrivals: `${lock}:arrivals`,
    };
    if (recent.size >= RECENT_MAX) recent.clear();
    recent.set(fullKey, names);
  }
  return names;
}

/** Names of recently used keys: a cycle needs them twice (acquire, release), a SHA-1 each time. */
const recent = new Map<string, RedisLockNames>();
const RECENT_MAX = 1_000;
