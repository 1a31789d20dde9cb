import { createHash } from 'node:crypto';

/** The Redis names used for one lock key. */
export interface RedisLockNames {
  readonly lock: string;
  readonly fence: string;
  readonly channel: string;
}

/**
 * Redis names for a (prefixed) lock key. All three start with a hash tag derived from a digest
 * of the key, so the lock and its fence counter always share a Cluster slot, and braces in the
 * user's key can never pick the slot (Redis uses the first `{...}` only, which is ours).
 */
export function redisLockNames(fullKey: string): RedisLockNames {
  const tag = createHash('sha1').update(fullKey).digest('base64url');
  const lock = `{${tag}}${fullKey}`;
  return { lock, fence: `${lock}:fence`, channel: `${lock}:released` };
}
