// ioredis clients to the machine's Redis (servers/redis-servers.ts MACHINE_REDIS_URL), for what
// only the benchmarks measure: its round trip and its version.
import Redis from 'ioredis';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';

/** A fresh ioredis client to the bench Redis. */
export function redisClient(): Redis {
  return new Redis(MACHINE_REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/** Median PING round trip to Redis, in ms: the "one round trip" of the contended ideal. */
export async function redisRoundTripMs(samples = 2_000): Promise<number> {
  const client = redisClient();
  try {
    for (let i = 0; i < 500; i++) await client.ping();
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const start = performance.now();
      await client.ping();
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    return times[times.length >> 1];
  } finally {
    client.disconnect();
  }
}

/** `redis_version` of the bench Redis. */
export async function redisVersion(): Promise<string> {
  const client = redisClient();
  try {
    const info = await client.info('server');
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } finally {
    client.disconnect();
  }
}
