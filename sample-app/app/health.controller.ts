/**
 * `GET /health`: a `@nestjs/terminus` health check of every lock backend the app configured
 * (each pinged, at most 1 s), one entry per backend: 200 when all answer, 503 naming the one
 * that does not.
 */
import { Controller, Get, Inject, Module } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { LockHealthIndicator, LockHealthModule } from '../../lib/terminus/index';

/** The health endpoint. */
@Controller('health')
export class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(LockHealthIndicator) private readonly locks: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy({ timeout: 1_000 })]);
  }
}

/** Terminus plus the lock health indicator, and the endpoint. */
@Module({
  imports: [TerminusModule, LockHealthModule],
  controllers: [HealthController],
})
export class HealthModule {}
