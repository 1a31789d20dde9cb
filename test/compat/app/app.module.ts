import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { TerminusModule } from '@nestjs/terminus';
import { LockModule } from 'nestjs-distributed-lock';
import { LockHealthModule } from 'nestjs-distributed-lock/terminus';
import { HealthController } from './health.controller.js';
import { LockController } from './lock.controller.js';
import { TickJob } from './tick.job.js';
import { WitnessService } from './witness.service.js';

/** What every root module of the app imports besides its LockModule. */
export const BASE_IMPORTS = [
  ConfigModule.forRoot(),
  ScheduleModule.forRoot(),
  TerminusModule,
  LockHealthModule,
];
/** The routes the battery drives. */
export const CONTROLLERS = [LockController, HealthController];
/** The witness and the cron job. */
export const PROVIDERS = [WitnessService, TickJob];

@Module({
  imports: [
    ...BASE_IMPORTS,
    // The README's forRootAsync example, as written there.
    LockModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (cfg: ConfigService) => ({
        backends: { main: { type: 'redis', url: cfg.getOrThrow<string>('REDIS_URL') } },
        keyPrefix: cfg.get<string>('LOCK_PREFIX', ''),
        // Environment values are strings: convert before handing them over.
        defaults: { ttl: Number(cfg.get('LOCK_TTL_MS') ?? 30_000) },
        shutdown: { timeout: Number(cfg.get('SHUTDOWN_TIMEOUT_MS') ?? 10_000) },
      }),
    }),
  ],
  controllers: CONTROLLERS,
  providers: PROVIDERS,
})
export class AppModule {}
