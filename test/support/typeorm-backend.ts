/**
 * What the typeorm fault tests share: the lock module options of one typeorm backend `db` on
 * its own table, and a short-lived MariaDB admin connection (the machine's root login) for what
 * a test does to the server behind the module's back.
 */
import { createConnection, type Connection } from 'mysql2/promise';
import type { TypeormBackendConfig } from '../../lib/backends/backend-config';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { dataSourceOptions, TEST_DATABASE } from '../../servers/databases';

/** A typeorm strategy. */
export type SqlStrategy = NonNullable<TypeormBackendConfig['strategy']>;

/**
 * Lock module options with one typeorm backend `db` on `dataSource` (the module creates it),
 * `strategy`, `tableName` (created on first use) and `keyPrefix`; `extra` adds backend options.
 */
export function typeormOptions(
  dataSource: Record<string, unknown>,
  strategy: SqlStrategy,
  tableName: string,
  keyPrefix: string,
  extra: Partial<TypeormBackendConfig> = {},
): LockModuleOptions {
  return {
    backends: {
      db: {
        type: 'typeorm',
        dataSourceOptions: { ...dataSource },
        strategy,
        tableName,
        createTable: true,
        ...extra,
      },
    },
    keyPrefix,
  };
}

/** Runs `work` on a fresh admin connection to the test MariaDB, closed afterwards. */
export async function withMariadbAdmin<T>(work: (admin: Connection) => Promise<T>): Promise<T> {
  const root = dataSourceOptions('mariadb');
  const admin = await createConnection({
    host: String(root.host),
    port: Number(root.port),
    user: String(root.username),
    password: String(root.password),
    database: TEST_DATABASE,
  });
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}
