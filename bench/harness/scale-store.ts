import type { LockModuleOptions } from '../../lib';
import { dataSourceOptions } from '../../servers/databases';
import type { StatementCounter } from './statement-counter';

/**
 * A store the scale suite runs on, as plain JSON: a worker process rebuilds the backend from it.
 * Every store is the suite's own (a Redis node and a ZooKeeper server it started, a table it
 * created), so counting its keys, rows, nodes and commands counts only this run's.
 */
export type ScaleStore =
  | { kind: 'memory' }
  | { kind: 'redis'; url: string }
  | { kind: 'postgres'; table: string }
  | { kind: 'zookeeper'; connect: string; root: string };

/** How the tables and charts name each store. */
export const STORE_LABELS: Record<ScaleStore['kind'], string> = {
  memory: 'memory',
  redis: 'Redis',
  postgres: 'PostgreSQL table',
  zookeeper: 'ZooKeeper',
};

/**
 * `LockModule.forRoot` options for one backend on `store`, with `defaults`. On PostgreSQL,
 * `counter` (when given) counts the statements the backend sends; the table strategy is the
 * one with renewals (for-update and advisory hold a connection per lock, which a pool of 10
 * cannot do for thousands).
 */
export function scaleModuleOptions(
  store: ScaleStore,
  defaults: NonNullable<LockModuleOptions['defaults']>,
  keyPrefix: string,
  counter?: StatementCounter,
): LockModuleOptions {
  const options = { defaults, keyPrefix };
  switch (store.kind) {
    case 'memory':
      return { ...options, backends: { store: { type: 'memory' } } };
    case 'redis':
      return {
        ...options,
        backends: { store: { type: 'redis', url: store.url, startup: 'fail' } },
      };
    case 'postgres':
      return {
        ...options,
        backends: {
          store: {
            type: 'typeorm',
            dataSourceOptions: {
              ...dataSourceOptions('postgres'),
              ...(counter ? { logger: counter } : {}),
            },
            strategy: 'table',
            tableName: store.table,
            createTable: true,
          },
        },
      };
    case 'zookeeper':
      return {
        ...options,
        backends: {
          store: {
            type: 'zookeeper',
            connectionString: store.connect,
            rootPath: store.root,
            startup: 'fail',
          },
        },
      };
  }
}
