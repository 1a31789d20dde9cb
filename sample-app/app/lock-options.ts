import type { DataSource } from 'typeorm';
import type { LockBackendConfig, LockModuleOptions } from '../../lib/index';
import type { AppConfig } from './app-config';
import { connectionOptions } from './data-source';

/** Namespace of every lock key of this app (`inventory:stock:<sku>`). */
const KEY_PREFIX = 'inventory:';

/**
 * The LockModule options for the configured lock backend. `store` is the product store's
 * DataSource: the embedded default keeps its lock table in that same SQLite file and on that
 * same connection, so one process never contends with itself for SQLite's write lock.
 */
export function lockModuleOptions(config: AppConfig, store: DataSource): LockModuleOptions {
  const { lock } = config;
  return {
    backends: { [lock.backend]: backendConfig(config, store) },
    defaults: { ttl: lock.ttlMs, waitTimeout: lock.waitMs },
    keyPrefix: KEY_PREFIX,
  };
}

function backendConfig(config: AppConfig, store: DataSource): LockBackendConfig {
  const { lock } = config;
  switch (lock.backend) {
    case 'memory':
      // In-process only: two app processes on `memory` do not exclude each other at all.
      return { type: 'memory' };
    case 'redis':
      return { type: 'redis', url: lock.redisUrl, restartGuard: lock.restartGuardMs };
    case 'redlock':
      return { type: 'redlock', urls: lock.redlockUrls, restartGuard: lock.restartGuardMs };
    case 'zookeeper':
      return { type: 'zookeeper', connectionString: lock.zkConnect, rootPath: '/inventory-locks' };
    case 'sqlite':
    case 'postgres':
    case 'mariadb': {
      const database = lock.database;
      if (database === undefined) throw new Error(`no database settings for ${lock.backend}`);
      const sql = {
        type: 'typeorm' as const,
        strategy: lock.strategy,
        tableName: `${config.tablePrefix}distributed_lock`,
        // CREATE TABLE IF NOT EXISTS on first use: the zero-setup default. In production, run
        // the library's migration (createDistributedLockMigration) instead.
        createTable: true,
      };
      if (database.kind === 'sqlite' && config.store.kind === 'sqlite') {
        return { ...sql, dataSource: store };
      }
      // Postgres/MariaDB locks get a pool of their own: for-update and advisory locks pin a
      // connection per held or waiting lock, which must not starve the product queries.
      return { ...sql, dataSourceOptions: { ...connectionOptions(database, lock.poolSize) } };
    }
  }
}
