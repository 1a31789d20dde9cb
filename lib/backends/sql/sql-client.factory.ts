import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import type { SqlBackendConfig, TypeormBackendConfig } from '../backend-config';
import { betterSqlite3Source, isBetterSqlite3 } from './better-sqlite3-source';
import { mysql2PoolOf, mysql2PoolSource } from './mysql2-pool-source';
import { isPgPool, pgPoolSource } from './pg-pool-source';
import { sqlBackendFactory } from './sql.factory';

/**
 * `type: 'sql'`: the SQL backend on the client the app passes. A TypeORM DataSource is handed
 * on as it is; a `pg` Pool, a `mysql2` pool or a `better-sqlite3` Database through its adapter
 * to the backend's SQL port (pg-pool-source.ts, mysql2-pool-source.ts, better-sqlite3-source.ts).
 * Everything else (strategies, table, fences, waiting) is the one SQL backend's.
 */
export const sqlClientBackendFactory: BackendFactory<SqlBackendConfig> = {
  validate(config, field) {
    if ('dataSource' in config || 'dataSourceToken' in config || 'dataSourceOptions' in config) {
      throw new LockConfigError(
        `${field}.client`,
        'a "sql" backend takes its connection as `client`; for dataSource, dataSourceToken or dataSourceOptions use type "typeorm"',
      );
    }
    renamed(field, () => sqlBackendFactory.validate(asTypeorm(config, field), field));
  },

  create(config, name, context) {
    const field = `backends.${name}`;
    return renamed(field, () => sqlBackendFactory.create(asTypeorm(config, field), name, context));
  },
};

/** The `typeorm` configuration of `config`: its client as the DataSource. */
function asTypeorm(
  config: SqlBackendConfig,
  field: string,
): TypeormBackendConfig & Record<string, unknown> {
  const { client, ...rest } = config as SqlBackendConfig & Record<string, unknown>;
  return { ...rest, type: 'typeorm', dataSource: dataSourceOf(client, field) };
}

/** The DataSource a client is seen through; a client of no known kind is refused. */
function dataSourceOf(client: unknown, field: string): object {
  if (isPgPool(client)) return pgPoolSource(client);
  const mysql2 = mysql2PoolOf(client);
  if (mysql2) return mysql2PoolSource(mysql2);
  if (isBetterSqlite3(client)) return betterSqlite3Source(client);
  const ds = client as { createQueryRunner?: unknown; options?: { type?: unknown } } | null;
  if (typeof ds?.createQueryRunner === 'function' && typeof ds.options?.type === 'string') {
    return ds;
  }
  throw new LockConfigError(
    `${field}.client`,
    'must be a pg Pool, a mysql2 pool (callback or promise API), a better-sqlite3 Database or a TypeORM DataSource',
  );
}

/** Runs `fn`, reporting what the typeorm backend says of its `dataSource` as of `client`. */
function renamed<T>(field: string, fn: () => T): T {
  const rename = (err: unknown): never => {
    if (err instanceof LockConfigError && err.field.startsWith(`${field}.dataSource`)) {
      throw new LockConfigError(`${field}.client`, err.detail, err.where);
    }
    throw err;
  };
  try {
    const result = fn();
    return result instanceof Promise ? (result.catch(rename) as T) : result;
  } catch (err) {
    return rename(err);
  }
}
