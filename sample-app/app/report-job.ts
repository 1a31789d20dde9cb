/**
 * The scheduled stock report: every REPORT_CRON tick, count the products and orders in the
 * store, log one line and (with REPORT_RUNS_FILE) record the run. Every replica schedules it,
 * yet each tick runs on one replica only, the same one every tick:
 *
 * - `@LeaderOnly('report')`: the replicas campaign for the name `report` from bootstrap; the
 *   one that leads runs every tick, the others' ticks resolve without running. Leadership is
 *   sticky, so no clock skew between replicas can make a tick run twice.
 * - If the leader crashes, another replica leads once its lease (REPORT_LEADER_TTL_MS) has run
 *   out and runs the ticks from then on; if it shuts down, the next leads at once. Each run
 *   records the term it ran under (strictly rising from leader to leader).
 */
import { type DynamicModule, Injectable, Module, type Type } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { DataSource } from 'typeorm';
import { LeaderOnly, LeaderService } from '../../lib/index';
import type { ReportConfig } from './app-config';
import { OrderEntry } from './order.entity';
import { Product } from './product.entity';
import { appendReportRun, type ReportRun } from './report-runs';
import { tickOf } from './report-schedule';

/** Leadership name of the report (its lock sits under the app's key prefix). */
export const REPORT_LEADERSHIP = 'report';

/**
 * Builds the report job's provider class for this configuration. Decorator arguments are
 * evaluated when the class is declared, and the schedule comes from validated configuration
 * known only at bootstrap, so the class is declared here rather than at module level (a
 * module-level `@Cron(process.env.REPORT_CRON)` would bypass validation).
 */
export function reportJobClass(report: ReportConfig): Type<unknown> {
  @Injectable()
  class ReportJob {
    constructor(
      private readonly dataSource: DataSource,
      private readonly leaders: LeaderService,
    ) {}

    /**
     * One report, on the leader. Failures (the product store unreachable) are logged by the
     * scheduler and the next tick tries again.
     */
    @Cron(report.schedule, { name: 'report-job' })
    @LeaderOnly(REPORT_LEADERSHIP, { ttl: report.leaderTtlMs })
    async run(): Promise<void> {
      const startedAt = Date.now();
      const [products, orders] = await Promise.all([
        this.dataSource.getRepository(Product).count(),
        this.dataSource.getRepository(OrderEntry).count(),
      ]);
      const run: ReportRun = {
        tick: new Date(tickOf(startedAt)).toISOString(),
        startedAt,
        pid: process.pid,
        term: this.leaders.status(REPORT_LEADERSHIP).term ?? null,
        products,
        orders,
      };
      if (report.runsFile !== null) await appendReportRun(report.runsFile, run);
      // console, not Nest's Logger: main.ts keeps the Logger to warnings and errors, and this
      // line is the job's visible output, like the startup line.
      console.log(
        `Report ${run.tick}: ${products} products, ${orders} orders (pid ${run.pid}, term ${run.term})`,
      );
    }
  }
  return ReportJob;
}

/**
 * The report job, scheduled when REPORT_CRON is set (`report` not null), absent otherwise.
 * Needs `ScheduleModule.forRoot()`, the LockModule and the product store's DataSource.
 */
@Module({})
export class ReportJobModule {
  /** The module for this configuration. */
  static forRoot(report: ReportConfig | null): DynamicModule {
    return { module: ReportJobModule, providers: report === null ? [] : [reportJobClass(report)] };
  }
}
