import { type DynamicModule, Global, Module, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from './app-config';
import { openStore } from './data-source';
import { InventoryStore } from './inventory.store';

/**
 * The product store: its DataSource (injectable by class, also by the lock module's factory)
 * and the InventoryStore on top of it. Closed at shutdown, after the lock module has released
 * held locks (Nest runs every `beforeApplicationShutdown` before any `onApplicationShutdown`),
 * since the SQLite lock table may live on this very connection.
 */
@Global()
@Module({})
export class DatabaseModule implements OnApplicationShutdown {
  constructor(private readonly dataSource: DataSource) {}

  /** The module for this configuration's store. */
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [{ provide: DataSource, useFactory: () => openStore(config) }, InventoryStore],
      exports: [DataSource, InventoryStore],
    };
  }

  /** Closes the store's connections. */
  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
