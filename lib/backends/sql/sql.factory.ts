import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import type { LockBackend, LockLossListener } from '../../core/contract/lock-backend';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import type { TypeormBackendConfig } from '../backend-config';
import { AdvisoryLockBackend } from './advisory.strategy';
import { ForUpdateLockBackend } from './for-update.strategy';
import { familyOf, IDENTIFIER, SqlDialect, type SqlFamily } from './sql-dialect';
import { SqlSource } from './sql-source';
import { TableLockBackend } from './table.strategy';
import type { SqlDataSource } from './typeorm-types';

const KEYS = new Set([
  'type',
  'dataSource',
  'dataSourceToken',
  'dataSourceOptions',
  'strategy',
  'tableName',
  'createTable',
]);
const STRATEGIES = ['table', 'for-update', 'advisory'] as const;
/** Which databases each strategy supports. */
const SUPPORTED: Record<(typeof STRATEGIES)[number], readonly SqlFamily[]> = {
  table: ['postgres', 'mysql', 'sqlite'],
  'for-update': ['postgres', 'mysql'], // mysql family: MariaDB only, see checkSupport
  advisory: ['postgres', 'mysql'],
};
const DEFAULT_TABLE = 'distributed_lock';

/** `type: 'typeorm'`: exactly one of `dataSource`, `dataSourceToken`, `dataSourceOptions`. */
export const sqlBackendFactory: BackendFactory<TypeormBackendConfig> = {
  validate(config, field) {
    for (const name of Object.keys(config)) {
      if (!KEYS.has(name))
        throw new LockConfigError(`${field}.${name}`, 'unknown option for a typeorm backend');
    }
    const given = (['dataSource', 'dataSourceToken', 'dataSourceOptions'] as const).filter(
      (k) => config[k] !== undefined,
    );
    if (given.length !== 1) {
      throw new LockConfigError(
        field,
        'set exactly one of dataSource, dataSourceToken or dataSourceOptions',
      );
    }
    const strategy = config.strategy ?? 'table';
    if (!STRATEGIES.includes(strategy)) {
      throw new LockConfigError(`${field}.strategy`, `must be one of ${STRATEGIES.join(', ')}`);
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
    if (config.createTable !== undefined && typeof config.createTable !== 'boolean') {
      throw new LockConfigError(`${field}.createTable`, 'must be true or false');
    }
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
      checkSupport(ds as SqlDataSource, strategy, `${field}.dataSource`);
    }
    if (config.dataSourceOptions !== undefined) {
      const type = (config.dataSourceOptions as { type?: unknown } | null)?.type;
      if (typeof type !== 'string')
        throw new LockConfigError(
          `${field}.dataSourceOptions`,
          'must be TypeORM DataSource options with a type',
        );
      checkSupport(
        { options: { type } } as SqlDataSource,
        strategy,
        `${field}.dataSourceOptions.type`,
      );
    }
  },

  async create(config, name, context) {
    const field = `backends.${name}`;
    const strategy = config.strategy ?? 'table';
    let resolve: () => SqlDataSource | Promise<SqlDataSource>;
    let family: SqlFamily;
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
      family = familyOf(ds)!;
      resolve = () => ds;
      owned = true;
    } else if (config.dataSource) {
      const ds = config.dataSource as unknown as SqlDataSource;
      family = familyOf(ds)!;
      resolve = () => ds;
    } else {
      const token = config.dataSourceToken;
      const lookup = (): SqlDataSource => {
        const ds = context.resolve(token) as SqlDataSource | undefined;
        if (!ds)
          throw new LockConfigError(`${field}.dataSourceToken`, 'no provider found for this token');
        return ds;
      };
      // The DataSource may be created after the lock module: check it now if it exists,
      // otherwise on first use.
      let early: SqlDataSource | undefined;
      try {
        early = lookup();
      } catch {
        early = undefined;
      }
      if (early) checkSupport(early, strategy, `${field}.dataSourceToken`);
      family = early ? familyOf(early)! : 'postgres';
      resolve = () => {
        const ds = lookup();
        checkSupport(ds, strategy, `${field}.dataSourceToken`);
        return ds;
      };
      if (!early) return lazyBackend(config, name, resolve, strategy);
    }
    return build(config, name, resolve, strategy, family, owned);
  },
};

function build(
  config: TypeormBackendConfig,
  name: string,
  resolve: () => SqlDataSource | Promise<SqlDataSource>,
  strategy: (typeof STRATEGIES)[number],
  family: SqlFamily,
  owned: boolean,
): LockBackend {
  const dialect = new SqlDialect(family);
  const source = new SqlSource(
    resolve,
    dialect,
    dialect.quote(config.tableName ?? DEFAULT_TABLE),
    config.createTable ?? false,
    owned,
    name,
  );
  switch (strategy) {
    case 'table':
      return new TableLockBackend(source);
    case 'for-update':
      return new ForUpdateLockBackend(source, name);
    case 'advisory':
      return new AdvisoryLockBackend(source, name);
  }
}

/**
 * A DataSource from DI that does not exist yet: the SQL family is only known once it does, so
 * the real backend is built on first use.
 */
function lazyBackend(
  config: TypeormBackendConfig,
  name: string,
  resolve: () => SqlDataSource | Promise<SqlDataSource>,
  strategy: (typeof STRATEGIES)[number],
): LockBackend {
  let real: Promise<LockBackend> | undefined;
  let lostListener: LockLossListener | undefined;
  const get = (): Promise<LockBackend> => {
    // Built on first use; a failed lookup is not cached, so a later call can succeed.
    real ??= (async () => {
      const ds = await resolve();
      const backend = build(config, name, () => ds, strategy, familyOf(ds)!, false);
      if (lostListener) backend.onLost?.(lostListener);
      return backend;
    })();
    real.catch(() => (real = undefined));
    return real;
  };
  const leaseBased = strategy === 'table';
  return {
    capabilities: { leaseBased, fencing: true, waiting: 'poll' },
    tryAcquire: async (request) => (await get()).tryAcquire(request),
    extend: async (k, t, ttl) => (await get()).extend(k, t, ttl),
    release: async (k, t) => (await get()).release(k, t),
    isLocked: async (k) => (await get()).isLocked(k),
    ping: async () => (await get()).ping(),
    // Only remembered here: the DataSource may not exist yet (attached when the backend is built).
    onLost: (listener) => {
      lostListener = listener;
    },
    close: async () => {
      const backend = await real?.catch(() => undefined);
      await backend?.close();
    },
  };
}

function checkSupport(
  ds: SqlDataSource,
  strategy: (typeof STRATEGIES)[number],
  field: string,
): void {
  const family = familyOf(ds);
  if (!family) {
    throw new LockConfigError(
      field,
      `database type "${ds.options.type}" is not supported (postgres, mysql, mariadb, better-sqlite3, sqlite)`,
    );
  }
  if (strategy === 'for-update' && ds.options.type === 'mysql') {
    // It relies on MariaDB's `FOR UPDATE WAIT n` and `LOCK IN SHARE MODE SKIP LOCKED`.
    throw new LockConfigError(
      field,
      'strategy "for-update" needs Postgres or MariaDB (type "mariadb"); on MySQL use "table" or "advisory"',
    );
  }
  if (!SUPPORTED[strategy].includes(family)) {
    throw new LockConfigError(
      field,
      `strategy "${strategy}" does not work on ${ds.options.type}; use strategy "table"`,
    );
  }
}
