import type { BackendFactory } from './backend-factory';

/**
 * Backend types, one line each. Each entry imports its folder lazily, so a backend's peer
 * package (ioredis, typeorm, ...) is only loaded when that backend is configured.
 */
export const BACKEND_FACTORIES: Record<string, () => Promise<BackendFactory<unknown>>> = {
  memory: async () => (await import('./memory/memory.factory')).memoryBackendFactory,
  redis: async () => (await import('./redis/redis.factory')).redisBackendFactory,
  redlock: async () => (await import('./redlock/redlock.factory')).redlockBackendFactory,
  zookeeper: async () => (await import('./zookeeper/zookeeper.factory')).zookeeperBackendFactory,
  typeorm: async () => (await import('./typeorm/typeorm.factory')).typeormBackendFactory,
};
