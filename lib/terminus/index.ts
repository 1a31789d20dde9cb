/**
 * `nestjs-distributed-lock/terminus`: the `@nestjs/terminus` health indicator. A separate entry
 * point so that applications without terminus never load it.
 */
export { LockHealthIndicator, type LockHealthCheckOptions } from './lock-health.indicator';
export { LockHealthModule } from './lock-health.module';
export { LeaderHealthIndicator, type LeaderHealthCheckOptions } from './leader-health.indicator';
