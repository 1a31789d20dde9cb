import { RedisKeyspace, type RedisLockNames } from '../../lib/backends/redis/redis-keys';

/** The Redis names the module uses for `key` under the module's `keyPrefix` `prefix`. */
export function redisLockNames(prefix: string, key: string): RedisLockNames {
  return new RedisKeyspace(prefix).names(prefix + key);
}
