import { Module, type DynamicModule } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../../servers/databases';

/** A PostgreSQL DataSource that DI makes late, as an app's own database module would. */
export interface LateDataSource {
  /** Import it beside `LockModule`: it provides and exports `token`. */
  readonly module: DynamicModule;
  /** The DataSource once DI made it. */
  readonly created: () => DataSource | undefined;
  /** Destroys it if DI made it. */
  readonly destroy: () => Promise<void>;
}

@Module({})
class LateDataSourceModule {}

/**
 * A module providing `token` as a PostgreSQL DataSource made asynchronously (after a short
 * delay), so a backend configured with `dataSourceToken` cannot find it when it is created and
 * must look it up later.
 */
export function lateDataSource(token: string): LateDataSource {
  let created: DataSource | undefined;
  return {
    module: {
      module: LateDataSourceModule,
      providers: [
        {
          provide: token,
          useFactory: async () => {
            await new Promise((r) => setTimeout(r, 50));
            created = new DataSource(dataSourceOptions('postgres') as never);
            return created.initialize();
          },
        },
      ],
      exports: [token],
    },
    created: () => created,
    destroy: async () => {
      if (created?.isInitialized) await created.destroy();
    },
  };
}
