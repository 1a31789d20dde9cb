import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { LeaderHealthIndicator } from './leader-health.indicator';
import { LockHealthIndicator } from './lock-health.indicator';

/**
 * Provides `LockHealthIndicator` and `LeaderHealthIndicator` (with terminus's
 * `HealthIndicatorService`). Import it in the
 * module of your health controller; `LockModule` must be visible there (it is global by default).
 */
@Module({
  imports: [TerminusModule],
  providers: [LockHealthIndicator, LeaderHealthIndicator],
  exports: [LockHealthIndicator, LeaderHealthIndicator],
})
export class LockHealthModule {}
