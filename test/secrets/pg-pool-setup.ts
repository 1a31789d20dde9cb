/**
 * Probe set-up (see runSecretProbe's `setup`): turns a `sql` config whose `client` holds `pg`
 * Pool options (JSON) into the Pool itself, made in the probe process as an app without an ORM
 * makes its pool, and handed to the lock module as `client`.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { LockBackendConfig, SqlBackendConfig } from '../../lib/backends/backend-config';

type PoolConstructor = new (options: object) => object;

export default function passPgPool(config: LockBackendConfig): LockBackendConfig {
  const { Pool } = createRequire(join(process.cwd(), 'package.json'))('pg') as {
    Pool: PoolConstructor;
  };
  const sql = config as SqlBackendConfig;
  return { ...sql, client: new Pool(sql.client) };
}
