import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { LockModule } from '../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { DatabaseModule } from './database.module';
import { InventoryController } from './inventory.controller';
import { InventoryService } from './inventory.service';
import { LockErrorsFilter } from './lock-errors.filter';
import { lockModuleOptions } from './lock-options';
import { LockedStockService } from './locked-stock.service';
import { OptimisticStockService } from './optimistic-stock.service';
import { SegmentedStockService } from './segmented-stock.service';
import { UnlockedStockService } from './unlocked-stock.service';

/** The inventory application, wired for one configuration. */
@Module({})
export class AppModule {
  /** Builds the module from an already validated configuration. */
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        DatabaseModule.forRoot(config),
        // Async, because the embedded default hands the lock backend the store's DataSource.
        LockModule.forRootAsync({
          inject: [DataSource],
          useFactory: (store: DataSource) => lockModuleOptions(config, store),
        }),
      ],
      controllers: [InventoryController],
      providers: [
        { provide: APP_CONFIG, useValue: config },
        { provide: APP_FILTER, useClass: LockErrorsFilter },
        InventoryService,
        LockedStockService,
        SegmentedStockService,
        OptimisticStockService,
        UnlockedStockService,
      ],
    };
  }
}
