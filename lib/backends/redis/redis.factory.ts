import { LockConfigError } from '../../errors/lock.errors';
import { loadOptionalPackage } from '../../core/optional-package';
import type { BackendFactory } from '../backend-factory';
import type { RedisBackendConfig } from '../backend-config';
import type { RedisLikeClient } from './redis-client';
import { RedisLockBackend } from './redis.backend';

const KEYS = new Set(['type', 'url', 'clusterNodes', 'client', 'redisOptions', 'clusterOptions']);

/** Shape of the ioredis module we need (it is an optional peer, loaded on first use). */
interface IoRedisModule {
  Redis: new (url: string, options?: object) => RedisLikeClient;
  Cluster: new (nodes: string[], options?: object) => RedisLikeClient;
}

/** `type: 'redis'`: exactly one of `url`, `clusterNodes` or `client`. */
export const redisBackendFactory: BackendFactory<RedisBackendConfig> = {
  validate(config, field) {
    for (const name of Object.keys(config)) {
      if (!KEYS.has(name))
        throw new LockConfigError(`${field}.${name}`, 'unknown option for a redis backend');
    }
    const given = (['url', 'clusterNodes', 'client'] as const).filter(
      (k) => config[k] !== undefined,
    );
    if (given.length !== 1) {
      throw new LockConfigError(field, 'set exactly one of url, clusterNodes or client');
    }
    if (config.url !== undefined) validateUrl(config.url, `${field}.url`);
    if (config.clusterNodes !== undefined) {
      if (!Array.isArray(config.clusterNodes) || config.clusterNodes.length === 0) {
        throw new LockConfigError(
          `${field}.clusterNodes`,
          'must be a non-empty array of redis:// URLs',
        );
      }
      config.clusterNodes.forEach((u, i) => validateUrl(u, `${field}.clusterNodes[${i}]`));
    }
    if (config.client !== undefined && !isRedisClient(config.client)) {
      throw new LockConfigError(`${field}.client`, 'must be an ioredis Redis or Cluster instance');
    }
    for (const opt of ['redisOptions', 'clusterOptions'] as const) {
      const v = config[opt];
      if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
        throw new LockConfigError(`${field}.${opt}`, 'must be an object of ioredis options');
      }
      if (v !== undefined && config.client !== undefined) {
        throw new LockConfigError(
          `${field}.${opt}`,
          'cannot be combined with client (configure your own client instead)',
        );
      }
    }
  },

  async create(config, name) {
    if (config.client)
      return new RedisLockBackend(config.client as unknown as RedisLikeClient, false, name);
    const field = `backends.${name}`;
    const mod = await loadOptionalPackage<IoRedisModule & { default?: IoRedisModule }>(
      'ioredis',
      field,
      'the redis backend',
    );
    const Redis = mod.Redis ?? mod.default?.Redis;
    const Cluster = mod.Cluster ?? mod.default?.Cluster;
    if (config.clusterNodes) {
      return new RedisLockBackend(
        new Cluster(config.clusterNodes, {
          redisOptions: { disconnectTimeout: 200 },
          ...config.clusterOptions,
        }),
        true,
        name,
      );
    }
    // disconnectTimeout: a dead server's socket never closes; do not hold the exit 2 s for it.
    return new RedisLockBackend(
      new Redis(config.url!, { disconnectTimeout: 200, ...config.redisOptions }),
      true,
      name,
    );
  },
};

function validateUrl(value: unknown, field: string): void {
  if (typeof value !== 'string' || !/^rediss?:\/\/[^\s]+$/.test(value)) {
    throw new LockConfigError(field, 'must be a redis:// or rediss:// URL');
  }
  try {
    new URL(value);
  } catch {
    throw new LockConfigError(field, 'is not a valid URL');
  }
}

function isRedisClient(value: unknown): boolean {
  const c = value as Partial<RedisLikeClient> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.evalsha === 'function' &&
    typeof c.duplicate === 'function'
  );
}
