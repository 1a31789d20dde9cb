/**
 * The scheduled stock report: every REPORT_CRON tick, count the products and orders in the
 * store, log one line and (with REPORT_RUNS_FILE) record the run. Every replica schedules it,
 * yet each tick runs on one replica only:
 *
 * - `@Locked('report-job', { onBusy: 'skip' })`: the replicas' timers fire at the same wall
 *   clock second; the first to take the lock runs the report, the others find it busy and skip
 *   the tick without waiting (`onBusy: 'skip'` implies `waitTimeout: 0`).
 * - `lockAtLeastFor`: the report takes milliseconds. Released at once, a replica whose clock is
 *   a little behind, or whose timer fires a little late, would find the lock free and run the
 *   same tick again. Keeping the lock taken for REPORT_LOCK_AT_LEAST_FOR_MS after the start
 *   absorbs that skew; it must stay shorter than the schedule's interval, or the next tick
 *   would find it still taken (app-config.ts enforces that).
 */
import { type DynamicModule, Injectable, Module, type Type } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { DataSource } from 'typeorm';
import { Locked, LockService } from '../../lib/index';
import type { ReportConfig } from './app-config';
import { OrderEntry } from './order.entity';
import { Product } from './product.entity';
import { appendReportRun, type ReportRun } from './report-runs';
import { tickOf } from './report-schedule';

/** Lock key of the report (the app's key prefix makes it `inventory:report-job`). */
export const REPORT_LOCK_KEY = 'report-job';

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
      private readonly locks: LockService,
    ) {}

    /**
     * One report. Failures (store or lock store unreachable) are logged by the scheduler and
     * the next tick tries again; a tick that finds the lock busy resolves without running.
     */
    @Cron(report.schedule, { name: REPORT_LOCK_KEY })
    @Locked(REPORT_LOCK_KEY, { onBusy: 'skip', lockAtLeastFor: report.lockAtLeastForMs })
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
        fence: this.locks.current()?.fence ?? null,
        products,
        orders,
      };
      if (report.runsFile !== null) await appendReportRun(report.runsFile, run);
      // console, not Nest's Logger: main.ts keeps the Logger to warnings and errors, and this
      // line is the job's visible output, like the startup line.
      console.log(
        `Report ${run.tick}: ${products} products, ${orders} orders (pid ${run.pid}, fence ${run.fence})`,
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
