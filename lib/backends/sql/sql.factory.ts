import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import { checkBoolean, checkExactlyOne, checkOptions } from '../../core/shared/options';
import type { TypeormBackendConfig } from '../backend-config';
import { AdvisoryStrategy } from './advisory.strategy';
import { ForUpdateStrategy } from './for-update.strategy';
import { familyOf, IDENTIFIER, type SqlFamily } from './sql-dialect';
import { SqlLockBackend } from './sql-lock.backend';
import type { SqlLockStrategy } from './sql-lock-strategy';
import { SqlSource } from './sql-source';
import { TableStrategy } from './table.strategy';
import type { SqlDataSource } from './typeorm-types';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'dataSource',
  'dataSourceToken',
  'dataSourceOptions',
  'strategy',
  'tableName',
  'createTable',
]);
type StrategyName = NonNullable<TypeormBackendConfig['strategy']>;
/** Each strategy: how it locks, and which databases it supports. */
const STRATEGIES: Record<StrategyName, { make(): SqlLockStrategy; on: readonly SqlFamily[] }> = {
  table: { make: () => new TableStrategy(), on: ['postgres', 'mysql', 'sqlite'] },
  // mysql family: MariaDB only, see checkSupport
  'for-update': { make: () => new ForUpdateStrategy(), on: ['postgres', 'mysql'] },
  advisory: { make: () => new AdvisoryStrategy(), on: ['postgres', 'mysql'] },
};
const STRATEGY_NAMES = Object.keys(STRATEGIES) as StrategyName[];
const DEFAULT_TABLE = 'distributed_lock';

/** `type: 'typeorm'`: exactly one of `dataSource`, `dataSourceToken`, `dataSourceOptions`. */
export const sqlBackendFactory: BackendFactory<TypeormBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a typeorm backend');
    checkExactlyOne(config, ['dataSource', 'dataSourceToken', 'dataSourceOptions'], field);
    const strategy = config.strategy ?? 'table';
    if (!STRATEGY_NAMES.includes(strategy)) {
      throw new LockConfigError(`${field}.strategy`, `must be one of ${STRATEGY_NAMES.join(', ')}`);
    }
    if (
      config.tableName !== undefined &&
      (typeof config.tableName !== 'string' || !IDENTIFIER.test(config.tableName))
    ) {
      throw new LockConfigError(
        `${field}.tableName`,
        'must be an identifier: a letter or "_", then letters, digits or "_" (max 63)',
      );
    }
    if (config.createTable !== undefined) checkBoolean(config.createTable, `${field}.createTable`);
    if (config.dataSource !== undefined) {
      const ds = config.dataSource as Partial<SqlDataSource> | null;
      if (
        typeof ds !== 'object' ||
        ds === null ||
        typeof ds.createQueryRunner !== 'function' ||
        typeof ds.options?.type !== 'string'
      ) {
        throw new LockConfigError(`${field}.dataSource`, 'must be a TypeORM DataSource');
      }
      checkSupport(ds.options.type, strategy, `${field}.dataSource`);
    }
    if (config.dataSourceOptions !== undefined) {
      const type = (config.dataSourceOptions as { type?: unknown } | null)?.type;
      if (typeof type !== 'string')
        throw new LockConfigError(
          `${field}.dataSourceOptions`,
          'must be TypeORM DataSource options with a type',
        );
      checkSupport(type, strategy, `${field}.dataSourceOptions.type`);
    }
  },

  async create(config, name, context) {
    const field = `backends.${name}`;
    const strategy = config.strategy ?? 'table';
    let find: () => SqlDataSource;
    let at: string; // the option the DataSource comes from, for errors
    let owned = false;
    if (config.dataSourceOptions) {
      const typeorm = await loadOptionalPackage<{ DataSource: new (o: object) => SqlDataSource }>(
        'typeorm',
        field,
        'the typeorm backend',
        'DataSource',
      );
      const ds = new typeorm.DataSource(config.dataSourceOptions);
      await ds.initialize(); // a wrong host or password fails the bootstrap, not the first lock
      find = () => ds;
      at = `${field}.dataSourceOptions.type`;
      owned = true;
    } else if (config.dataSource) {
      const ds = config.dataSource as unknown as SqlDataSource;
      find = () => ds;
      at = `${field}.dataSource`;
    } else {
      const token = config.dataSourceToken;
      find = () => {
        const ds = context.resolve(token) as SqlDataSource | undefined;
        if (!ds)
          throw new LockConfigError(`${field}.dataSourceToken`, 'no provider found for this token');
        return ds;
      };
      at = `${field}.dataSourceToken`;
      // The DataSource may be created after the lock module: check it now if it exists,
      // otherwise on first use.
      let early: SqlDataSource | undefined;
      try {
        early = find();
      } catch {
        early = undefined;
      }
      if (early) checkSupport(early.options.type, strategy, at);
    }
    const source = new SqlSource({
      find: () => {
        const dataSource = find();
        return { dataSource, family: checkSupport(dataSource.options.type, strategy, at) };
      },
      tableName: config.tableName ?? DEFAULT_TABLE,
      createTable: config.createTable ?? false,
      owned,
      backendName: name,
    });
    return new SqlLockBackend(source, STRATEGIES[strategy].make(), name);
  },
};

/** Checks that `strategy` runs on a database of TypeORM type `type`; returns its SQL family. */
function checkSupport(type: string, strategy: StrategyName, field: string): SqlFamily {
  const family = familyOf(type);
  if (!family) {
    throw new LockConfigError(
      field,
      `database type "${type}" is not supported (postgres, mysql, mariadb, better-sqlite3, sqlite)`,
    );
  }
  if (strategy === 'for-update' && type === 'mysql') {
    // It relies on MariaDB's `FOR UPDATE WAIT n` and `LOCK IN SHARE MODE SKIP LOCKED`.
    throw new LockConfigError(
      field,
      'strategy "for-update" needs Postgres or MariaDB (type "mariadb"); on MySQL use "table" or "advisory"',
    );
  }
  if (!STRATEGIES[strategy].on.includes(family)) {
    throw new LockConfigError(
      field,
      `strategy "${strategy}" does not work on ${type}; use strategy "table"`,
    );
  }
  return family;
}
