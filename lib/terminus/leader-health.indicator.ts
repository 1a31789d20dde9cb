import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LeaderService } from '../leader/leader.service';

/** Options of `LeaderHealthIndicator.isHealthy`. */
export interface LeaderHealthCheckOptions {
  /** Names to report (default: every name this instance campaigned for). */
  names?: string[];
  /** Prefix of each name's key in the health report (default `'leader:'`). */
  keyPrefix?: string;
}

/**
 * `@nestjs/terminus` indicator of this instance's leaderships: one `up` entry per name, saying
 * whether this instance leads it (a follower is healthy too), with the term and since when:
 * `{ 'leader:reports': { status: 'up', role: 'leader', term: 1732761600123456, since: '...' } }`.
 * No I/O: it reports what this instance knows.
 */
@Injectable()
export class LeaderHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly leaders: LeaderService,
  ) {}

  /** One entry per name. */
  isHealthy(options: LeaderHealthCheckOptions = {}): HealthIndicatorResult {
    const { keyPrefix = 'leader:', names } = options;
    const statuses = names ? names.map((n) => this.leaders.status(n)) : this.leaders.status();
    const result: HealthIndicatorResult = {};
    for (const { name, role, term, since, transitions } of statuses) {
      const details: Record<string, unknown> =
        role === 'leader'
          ? { role, term, since: since!.toISOString(), transitions }
          : { role, transitions };
      Object.assign(result, this.indicators.check(`${keyPrefix}${name}`).up(details));
    }
    return result;
  }
}
