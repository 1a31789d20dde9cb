import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { LockHealthIndicator } from './lock-health.indicator';

/**
 * Provides `LockHealthIndicator` (with terminus's `HealthIndicatorService`). Import it in the
 * module of your health controller; `LockModule` must be visible there (it is global by default).
 */
@Module({
  imports: [TerminusModule],
  providers: [LockHealthIndicator],
  exports: [LockHealthIndicator],
})
export class LockHealthModule {}
