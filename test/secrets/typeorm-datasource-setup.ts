/**
 * Probe set-up (see runSecretProbe's `setup`): turns a typeorm config's `dataSourceOptions`
 * into a DataSource the app passes in (`dataSource`), created in the probe process and left
 * for the lock module to initialize, as an app that hands its own DataSource over would.
 */
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { LockBackendConfig, TypeormBackendConfig } from '../../lib/backends/backend-config';

export default function passDataSource(config: LockBackendConfig): LockBackendConfig {
  const { dataSourceOptions, ...rest } = config as TypeormBackendConfig;
  const typeorm: TypeormBackendConfig = {
    ...rest,
    dataSource: new DataSource(dataSourceOptions as unknown as DataSourceOptions),
  };
  return typeorm;
}
