import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import type { LockHealthOptions } from '../lock.interfaces';
import { LockService } from '../lock.service';

/** Options of `LockHealthIndicator.isHealthy`. */
export interface LockHealthCheckOptions extends LockHealthOptions {
  /** Prefix of each backend's key in the health report (default `'lock:'`, e.g. `lock:main`). */
  keyPrefix?: string;
}

/**
 * `@nestjs/terminus` health indicator: pings each configured lock backend (in parallel, each
 * bounded by `timeout`, default 1 000 ms) and reports one entry per backend, so a health
 * report names the store that is down:
 * `{ 'lock:main': { status: 'up', latencyMs: 0.4 }, 'lock:zk': { status: 'down', ... } }`.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.locks.isHealthy({ timeout: 500 })]); }
 * ```
 */
@Injectable()
export class LockHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly locks: LockService,
  ) {}

  /** One result entry per backend: `up` with its latency, or `down` with the reason. */
  async isHealthy(options: LockHealthCheckOptions = {}): Promise<HealthIndicatorResult> {
    const { keyPrefix = 'lock:', ...healthOptions } = options;
    const statuses = await this.locks.health(healthOptions);
    const result: HealthIndicatorResult = {};
    for (const [name, health] of Object.entries(statuses)) {
      const session = this.indicators.check(`${keyPrefix}${name}`);
      Object.assign(
        result,
        health.status === 'up'
          ? session.up({ latencyMs: health.latencyMs })
          : session.down({ latencyMs: health.latencyMs, message: health.error ?? 'down' }),
      );
    }
    return result;
  }
}
