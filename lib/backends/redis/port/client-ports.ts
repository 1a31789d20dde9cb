import { IoRedisPort, isIoRedisLike } from './ioredis-port';
import type { RedisPort } from './redis-port';

/** The client family of a client the user passed in, and whether it is a Cluster's. */
export interface ClientDescription {
  readonly family: string;
  readonly cluster: boolean;
}

/** What `client` is, without any I/O; undefined when no adapter knows it. */
export function describeClient(client: unknown): ClientDescription | undefined {
  if (isIoRedisLike(client)) return { family: 'ioredis', cluster: client.isCluster === true };
  return undefined;
}

/** The port over a client the user passed in; undefined when no adapter knows it. */
export function portOf(client: unknown): RedisPort | undefined {
  if (isIoRedisLike(client)) return new IoRedisPort(client);
  return undefined;
}
