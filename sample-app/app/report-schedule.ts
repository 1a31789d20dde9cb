/**
 * Timing of the scheduled stock report (report-job.ts): how far apart its cron schedule fires,
 * which bounds a sensible `lockAtLeastFor`, and which tick a run belongs to. Kept apart from
 * the job itself so that app-config.ts can validate REPORT_CRON without loading Nest.
 */
import { CronTime } from 'cron';

/** Upcoming fire times looked at to find the shortest gap of an irregular schedule. */
const OCCURRENCES = 16;
/** The finest resolution of a cron schedule (its optional first field counts seconds). */
const TICK_MS = 1_000;

/**
 * The shortest gap, in ms, between consecutive fire times of `expression` over its next few
 * occurrences (a conservative bound for schedules like `0 0 9 * * 1-5`). Throws if the
 * expression is not a valid cron expression.
 */
export function shortestIntervalMs(expression: string): number {
  const { valid, error } = CronTime.validateCronExpression(expression);
  if (!valid) throw error ?? new Error(`invalid cron expression "${expression}"`);
  const times = new CronTime(expression).sendAt(OCCURRENCES).map((date) => date.toMillis());
  let shortest = Number.POSITIVE_INFINITY;
  for (let i = 1; i < times.length; i++) shortest = Math.min(shortest, times[i] - times[i - 1]);
  return shortest;
}

/**
 * The scheduled fire time a run started at `nowMs` belongs to: the wall clock rounded down to
 * the whole second. Exact as long as the run starts less than a second late, because cron
 * never fires before the scheduled time (it re-arms a timer that wakes early) and a run
 * starts within milliseconds of firing; every replica computes the same value for one tick.
 */
export function tickOf(nowMs: number): number {
  return Math.floor(nowMs / TICK_MS) * TICK_MS;
}
