import { Logger } from '@nestjs/common';
import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory, SecretRedactor } from '../../core/contract/backend-factory';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import {
  checkBoolean,
  checkDuration,
  checkExactlyOne,
  checkOptions,
  describe,
} from '../../core/shared/options';
import type { TypeormBackendConfig } from '../backend-config';
import { AdvisoryStrategy } from './advisory.strategy';
import { maxWaitingConnectionsFor } from './database-wait-slots';
import { ForUpdateStrategy } from './for-update.strategy';
import { poolSizeOf } from './pinned-connections';
import { DEFAULT_FENCE_BUCKETS, MAX_FENCE_BUCKETS } from './fence-layout';
import { familyOf, IDENTIFIER, reservedTableName, type SqlFamily } from './sql-dialect';
import { SqlLockBackend } from './sql-lock.backend';
import type { SqlLockStrategy } from './sql-lock-strategy';
import type { SqlServer } from './sql-server';
import { DEFAULT_SESSION_TIMEOUT_MS, MIN_SESSION_TIMEOUT_MS } from './sql-sessions';
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
  'startup',
  'sessionTimeout',
  'maxWaitingConnections',
  'releaseNotifications',
  'fenceBuckets',
]);
type StrategyName = NonNullable<TypeormBackendConfig['strategy']>;
/** Each strategy: how it locks, and which databases it supports. */
const STRATEGIES: Record<
  StrategyName,
  { make(sessionTimeoutMs: number): SqlLockStrategy; on: readonly SqlFamily[] }
> = {
  table: { make: () => new TableStrategy(), on: ['postgres', 'mysql', 'sqlite'] },
  // mysql family: MariaDB only, told by the server (see checkServer)
  'for-update': { make: (ms) => new ForUpdateStrategy(ms), on: ['postgres', 'mysql'] },
  advisory: { make: (ms) => new AdvisoryStrategy(ms), on: ['postgres', 'mysql'] },
};
const STRATEGY_NAMES = Object.keys(STRATEGIES) as StrategyName[];
const STARTUP_MODES: ReadonlyArray<NonNullable<TypeormBackendConfig['startup']>> = [
  'fail',
  'degraded',
];
const DEFAULT_TABLE = 'distributed_lock';

/** `type: 'typeorm'`: exactly one of `dataSource`, `dataSourceToken`, `dataSourceOptions`. */
export const sqlBackendFactory: BackendFactory<TypeormBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a typeorm backend');
    const source = checkExactlyOne(
      config,
      ['dataSource', 'dataSourceToken', 'dataSourceOptions'],
      field,
    );
    const strategy = config.strategy ?? 'table';
    if (!STRATEGY_NAMES.includes(strategy)) {
      throw new LockConfigError(`${field}.strategy`, `must be one of ${STRATEGY_NAMES.join(', ')}`);
    }
    const tableName = config.tableName ?? DEFAULT_TABLE;
    if (typeof tableName !== 'string' || !IDENTIFIER.test(tableName)) {
      throw new LockConfigError(
        `${field}.tableName`,
        'must be an identifier: a letter or "_", then letters, digits or "_" (max 63)',
      );
    }
    if (config.createTable !== undefined) checkBoolean(config.createTable, `${field}.createTable`);
    if (config.startup !== undefined) {
      if (!STARTUP_MODES.includes(config.startup)) {
        throw new LockConfigError(
          `${field}.startup`,
          `must be one of ${STARTUP_MODES.join(', ')}, got ${describe(config.startup)}`,
        );
      }
      if (source !== 'dataSourceOptions') {
        throw new LockConfigError(
          `${field}.startup`,
          'applies to dataSourceOptions only: a DataSource you pass in is connected by your app',
        );
      }
    }
    if (config.sessionTimeout !== undefined) {
      const ms = checkDuration(config.sessionTimeout, `${field}.sessionTimeout`);
      if (ms < MIN_SESSION_TIMEOUT_MS) {
        throw new LockConfigError(
          `${field}.sessionTimeout`,
          `must be at least ${MIN_SESSION_TIMEOUT_MS} ms, got ${ms}`,
        );
      }
      if (strategy === 'table') {
        throw new LockConfigError(
          `${field}.sessionTimeout`,
          'applies to the session strategies (for-update, advisory); a table lock expires with its ttl',
        );
      }
    }
    if (config.maxWaitingConnections !== undefined) {
      checkWaitingConnections(config.maxWaitingConnections, `${field}.maxWaitingConnections`);
      if (strategy === 'table') {
        throw new LockConfigError(
          `${field}.maxWaitingConnections`,
          'applies to strategies "for-update" and "advisory" (on PostgreSQL), whose waiters wait in the database on a connection',
        );
      }
    }
    if (config.releaseNotifications !== undefined) {
      checkBoolean(config.releaseNotifications, `${field}.releaseNotifications`);
      if (strategy !== 'table') {
        throw new LockConfigError(
          `${field}.releaseNotifications`,
          'applies to strategy "table" only (the one whose waiters listen for releases on PostgreSQL)',
        );
      }
    }
    if (config.fenceBuckets !== undefined)
      checkFenceBuckets(config.fenceBuckets, `${field}.fenceBuckets`);
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
      checkSupport(ds.options.type, strategy, tableName, `${field}.dataSource`, field);
      checkWaitingFitsPool(config, ds.options, field);
    }
    if (config.dataSourceOptions !== undefined) {
      const type = (config.dataSourceOptions as { type?: unknown } | null)?.type;
      if (typeof type !== 'string')
        throw new LockConfigError(
          `${field}.dataSourceOptions`,
          'must be TypeORM DataSource options with a type',
        );
      checkSupport(type, strategy, tableName, `${field}.dataSourceOptions.type`, field);
      checkWaitingFitsPool(config, config.dataSourceOptions, field);
    }
  },

  async create(config, name, context) {
    const field = `backends.${name}`;
    const strategy = config.strategy ?? 'table';
    const tableName = config.tableName ?? DEFAULT_TABLE;
    const sessionTimeoutMs = Math.ceil(config.sessionTimeout ?? DEFAULT_SESSION_TIMEOUT_MS);
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
    }
    const source = new SqlSource({
      find: () => {
        const dataSource = find();
        const family = checkSupport(dataSource.options.type, strategy, tableName, at, field);
        checkWaitingFitsPool(config, dataSource.options, field); // a DataSource from DI: its pool now
        return { dataSource, family };
      },
      checkServer: (server, family) => checkServer(server, family, strategy, at),
      tableName,
      createTable: config.createTable ?? false,
      owned,
      backendName: name,
      redactor: context.redactor,
      fenceBuckets: config.fenceBuckets ?? DEFAULT_FENCE_BUCKETS,
    });
    const backend = new SqlLockBackend(
      source,
      STRATEGIES[strategy].make(sessionTimeoutMs),
      name,
      sessionTimeoutMs,
      {
        maxWaitingConnections: config.maxWaitingConnections,
        releaseNotifications: config.releaseNotifications ?? true,
        family: () => knownFamily(find),
      },
    );
    if (owned) {
      try {
        await connectAtStartup(source, config.startup ?? 'fail', name, context.redactor);
      } catch (err) {
        await source.close().catch(() => undefined); // connected half-way: close what opened
        throw err;
      }
    } else {
      // The app's DataSource: checked now if it exists already (a DataSource that DI creates
      // later is checked on first use), asked which server it is if it is connected.
      let early: SqlDataSource | undefined;
      try {
        early = find();
      } catch {
        early = undefined;
      }
      if (early) checkSupport(early.options.type, strategy, tableName, at, field);
      if (early?.isInitialized) {
        await source.connect().catch((err: unknown) => {
          if (err instanceof LockConfigError) throw err; // the wrong server: say so at bootstrap
        });
      }
    }
    return backend;
  },
};

/**
 * The SQL family of the DataSource if it can be found now (a session strategy's capabilities
 * depend on it); `undefined` for one that DI makes later (the backend learns it on first use).
 */
function knownFamily(find: () => SqlDataSource): SqlFamily | undefined {
  try {
    return familyOf(find().options.type);
  } catch {
    return undefined;
  }
}

/** `maxWaitingConnections`: a whole number of connections, 0 or more. */
function checkWaitingConnections(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new LockConfigError(field, `must be a whole number >= 0, got ${describe(value)}`);
  }
  return value;
}

/**
 * `maxWaitingConnections` must leave the pool one connection for ordinary queries and one for a
 * holder: at most the pool size minus two.
 */
function checkWaitingFitsPool(
  config: TypeormBackendConfig,
  options: { poolSize?: unknown; extra?: unknown },
  field: string,
): void {
  const wanted = config.maxWaitingConnections;
  if (wanted === undefined) return;
  const pool = poolSizeOf(options);
  const max = maxWaitingConnectionsFor(pool);
  if (wanted > max) {
    throw new LockConfigError(
      `${field}.maxWaitingConnections`,
      `must be at most ${max} with a pool of ${pool} (one connection stays for ordinary queries and one for a holder), got ${wanted}`,
    );
  }
}

/** `fenceBuckets`: a whole number of counter rows, 1 to {@link MAX_FENCE_BUCKETS}. */
function checkFenceBuckets(value: unknown, field: string): void {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < 1 ||
    value > MAX_FENCE_BUCKETS
  ) {
    throw new LockConfigError(
      field,
      `must be a whole number from 1 to ${MAX_FENCE_BUCKETS}, got ${describe(value)}`,
    );
  }
}

/**
 * What bootstrap does with the module's own DataSource (`dataSourceOptions`): `'fail'` connects
 * now, and a database that cannot be reached fails the bootstrap with the cause; `'degraded'`
 * connects in the background and logs why it could not, and every call retries (failing at once
 * with the cause) until the database answers.
 */
async function connectAtStartup(
  source: SqlSource,
  startup: NonNullable<TypeormBackendConfig['startup']>,
  name: string,
  redactor: SecretRedactor,
): Promise<void> {
  if (startup === 'fail') {
    await source.connect(); // a wrong host or password fails the bootstrap, not the first lock
    return;
  }
  source.connect().catch((err: unknown) => {
    const logger = new Logger('LockService');
    if (err instanceof LockConfigError) logger.error(`backend "${name}": ${err.message}`);
    else
      logger.warn(
        `backend "${name}": the database cannot be reached (${redactor.message(err)}); started degraded: lock calls fail with the cause until it answers`,
      );
  });
}

/**
 * Checks, from its declared TypeORM type, that `strategy` runs on the database and that the
 * table name is usable there; returns its SQL family. `field` names the option the type came
 * from, `backendField` the backend (for the table name).
 */
function checkSupport(
  type: string,
  strategy: StrategyName,
  tableName: string,
  field: string,
  backendField: string,
): SqlFamily {
  const family = familyOf(type);
  if (!family) {
    throw new LockConfigError(
      field,
      `database type "${type}" is not supported (postgres, mysql, mariadb, better-sqlite3, sqlite)`,
    );
  }
  if (!STRATEGIES[strategy].on.includes(family)) {
    throw new LockConfigError(
      field,
      `strategy "${strategy}" does not work on ${type}; use strategy "table"`,
    );
  }
  const reserved = reservedTableName(family, tableName);
  if (reserved) throw new LockConfigError(`${backendField}.tableName`, reserved);
  return family;
}

/**
 * Checks the strategy against the server itself: `for-update` relies on MariaDB's
 * `FOR UPDATE WAIT n` and `LOCK IN SHARE MODE SKIP LOCKED`, so a MySQL server is refused,
 * and a MariaDB server reached with `type: 'mysql'` is accepted.
 */
export function checkServer(
  server: SqlServer,
  family: SqlFamily,
  strategy: StrategyName,
  field: string,
): void {
  if (strategy === 'for-update' && family === 'mysql' && !server.mariadb) {
    throw new LockConfigError(
      field,
      'strategy "for-update" needs Postgres or MariaDB, and this server is MySQL; use "table" or "advisory"',
    );
  }
}
