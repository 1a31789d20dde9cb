/**
 * Our Redis acquire and release scripts sent raw (EVALSHA, no backend, no engine), with the KEYS
 * and arguments the backend sends on a single node with the default buckets: what the profiling
 * tools compare the whole cycle with.
 */
import type Redis from 'ioredis';
import { DEFAULT_FENCE_BUCKETS, fenceBucket } from '../../lib/backends/redis/fence-buckets';
import { RedisKeyspace } from '../../lib/backends/redis/redis-keys';
import { MUTEX_ACQUIRE, MUTEX_RELEASE } from '../../lib/backends/redis/scripts/mutex';
import { newOwnerToken } from '../../lib/core/shared/token';

/**
 * The KEYS the backend sends with a key script for `key` (no key prefix) on a single node with
 * the default fence buckets: lock, queue, its bucket's counter, waiter expiries, arrivals.
 */
export function scriptKeys(key: string): string[] {
  const keyspace = new RedisKeyspace('');
  const names = keyspace.names(key);
  return [
    names.lock,
    names.queue,
    keyspace.counter(fenceBucket(names.slot, DEFAULT_FENCE_BUCKETS)),
    names.waiters,
    names.arrivals,
  ];
}

/** Loads both scripts of an uncontended mutex cycle on `client`'s node. */
export async function loadRawScripts(client: Redis): Promise<void> {
  await client.script('LOAD', MUTEX_ACQUIRE.source);
  await client.script('LOAD', MUTEX_RELEASE.source);
}

/**
 * One acquire + release of `key` by the mutex's lean scripts alone, as the backend sends them
 * for a free key; throws if the acquire found it busy.
 */
export function rawScriptCycle(client: Redis, key: string): () => Promise<void> {
  const keys = scriptKeys(key);
  return async () => {
    const token = newOwnerToken();
    const fence = await client.evalsha(
      MUTEX_ACQUIRE.sha,
      3,
      keys[0],
      keys[1],
      keys[2],
      token,
      30_000,
    );
    if (fence === null) throw new Error(`raw scripts: ${key} is busy`);
    await client.evalsha(MUTEX_RELEASE.sha, 1, keys[0], token);
  };
}
