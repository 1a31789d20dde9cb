import type { BackendTypes } from '../core/contract/backend-factory';

/**
 * Backend types, one line each: the one place that knows every backend. Each entry imports its
 * folder lazily, so a backend's peer package (ioredis, typeorm, ...) is only loaded when that
 * backend is configured.
 */
export const BACKEND_TYPES: BackendTypes = {
  memory: async () => (await import('./memory/memory.factory')).memoryBackendFactory,
  redis: async () => (await import('./redis/redis.factory')).redisBackendFactory,
  redlock: async () => (await import('./redlock/redlock.factory')).redlockBackendFactory,
  zookeeper: async () => (await import('./zookeeper/zookeeper.factory')).zookeeperBackendFactory,
  typeorm: async () => (await import('./sql/sql.factory')).sqlBackendFactory,
  sql: async () => (await import('./sql/sql-client.factory')).sqlClientBackendFactory,
  // The testing kit's store (nestjs-distributed-lock/testing), configured by LockTestingModule.
  testing: async () => (await import('./memory/testing.factory')).testingBackendFactory,
};
