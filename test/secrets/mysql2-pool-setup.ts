/**
 * Probe set-up (see runSecretProbe's `setup`): turns a `sql` config whose `client` holds
 * `mysql2` pool options (JSON) into the pool itself (its promise API), made in the probe process
 * as an app without an ORM makes its pool, and handed to the lock module as `client`.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { LockBackendConfig, SqlBackendConfig } from '../../lib/backends/backend-config';

type Mysql2 = { createPool(options: object): { promise(): object } };

export default function passMysql2Pool(config: LockBackendConfig): LockBackendConfig {
  const mysql2 = createRequire(join(process.cwd(), 'package.json'))('mysql2') as Mysql2;
  const sql = config as SqlBackendConfig;
  return { ...sql, client: mysql2.createPool(sql.client).promise() };
}
