import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { DataSource } from 'typeorm';
import { LockModule } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { CheckoutController } from './checkout.controller';
import { CheckoutService } from './checkout.service';
import { DatabaseModule } from './database.module';
import { HealthModule } from './health.controller';
import { InventoryController } from './inventory.controller';
import { InventoryService } from './inventory.service';
import { LockErrorsFilter } from './lock-errors.filter';
import { lockModuleOptions } from './lock-options';
import { LockedStockService } from './locked-stock.service';
import { MetricsModule } from './metrics';
import { OptimisticStockService } from './optimistic-stock.service';
import { FakePaymentProvider } from './payment-provider';
import { PriceStore } from './price.store';
import { PricingController } from './pricing.controller';
import { PricingService } from './pricing.service';
import { ReportJobModule } from './report-job';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { SegmentedStockService } from './segmented-stock.service';
import { UnlockedStockService } from './unlocked-stock.service';

/** The inventory application, wired for one configuration. */
@Module({})
export class AppModule {
  /**
   * Builds the module from an already validated configuration; with `metrics` (the exporter
   * `startMetrics()` registered), also serves `GET /metrics`.
   */
  static forRoot(config: AppConfig, metrics?: PrometheusExporter): DynamicModule {
    return {
      module: AppModule,
      imports: [
        DatabaseModule.forRoot(config),
        // Async, because the embedded default hands the lock backend the store's DataSource.
        LockModule.forRootAsync({
          inject: [DataSource],
          useFactory: (store: DataSource) => lockModuleOptions(config, store),
        }),
        // Runs @Cron methods; the report job is its only one (scheduled when REPORT_CRON is set).
        ScheduleModule.forRoot(),
        ReportJobModule.forRoot(config.report),
        // GET /health: every lock backend pinged (terminus).
        HealthModule,
        ...(metrics ? [MetricsModule.forRoot(metrics)] : []),
      ],
      controllers: [InventoryController, PricingController, CheckoutController],
      providers: [
        { provide: APP_CONFIG, useValue: config },
        { provide: APP_FILTER, useClass: LockErrorsFilter },
        InventoryService,
        LockedStockService,
        SegmentedStockService,
        OptimisticStockService,
        UnlockedStockService,
        PriceStore,
        PricingService,
        FakePaymentProvider,
        CheckoutService,
      ],
    };
  }
}
