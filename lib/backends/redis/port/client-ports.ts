import { IoRedisPort, isIoRedisLike } from './ioredis-port';
import { isNodeRedisCluster, NodeRedisClusterPort } from './node-redis-cluster-port';
import { isNodeRedisClient, NodeRedisPort } from './node-redis-port';
import type { RedisPort } from './redis-port';

/** What kind of client a value is, as option validation names it. */
export interface ClientDescription {
  /**
   * `ioredis` (an ioredis 5 or 6 or an iovalkey `Redis` or `Cluster`: nothing on an instance
   * tells iovalkey apart without loading the packages) or `node-redis` (4, 5 or 6).
   */
  readonly family: 'ioredis' | 'node-redis';
  /** A Cluster client. */
  readonly cluster: boolean;
}

/**
 * What kind of Redis client `client` is, by its shape alone (no I/O, no client library
 * loaded); `undefined` for anything else (a plain object, another library's client, null).
 */
export function describeClient(client: unknown): ClientDescription | undefined {
  if (isIoRedisLike(client)) return { family: 'ioredis', cluster: client.isCluster === true };
  if (isNodeRedisCluster(client)) return { family: 'node-redis', cluster: true };
  if (isNodeRedisClient(client)) return { family: 'node-redis', cluster: false };
  return undefined;
}

/**
 * The port over a Redis client the user passed in, by its shape alone (see
 * {@link describeClient}); `undefined` when it is none. The port adds no listener before
 * `watch()` and never connects or closes the client: it stays the user's.
 */
export function portOf(client: unknown): RedisPort | undefined {
  if (isIoRedisLike(client)) return new IoRedisPort(client);
  if (isNodeRedisCluster(client)) return new NodeRedisClusterPort(client);
  if (isNodeRedisClient(client)) return new NodeRedisPort(client);
  return undefined;
}
