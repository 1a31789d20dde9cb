// The sample app's scheduled report (sample-app/app/report-job.ts: @Cron + @Locked with
// onBusy 'skip' and lockAtLeastFor) in two real app processes firing every second: with one
// shared lock store each tick runs exactly once between them, never twice and never on
// neither. The control runs the same two processes each on its own in-process lock store, and
// every tick then runs twice: the assertions would catch a lock that did not exclude.
// Evidence is the runs file both processes append to (one JSON line per run, with the tick it
// ran for and its pid), read after they have stopped, so nothing depends on stdout ordering.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { dirname, join } from 'node:path';
import {
  CLEAN_APP_ENV,
  startApp,
  stopAllApps,
  type AppProcess,
} from '../../sample-app/demo/app-process';
import { callJson } from '../../sample-app/demo/load-client';
import { readReportRuns, type ReportRun } from '../../sample-app/demo/report-runs-reader';
import { tempSqliteFile } from '../../servers/databases';
import { startRedisNode, type RedisNode } from '../../servers/redis-servers';

const TICK_MS = 1_000;
const EVERY_SECOND = '* * * * * *';
/**
 * Half the tick: long enough that a replica firing up to 500 ms late finds the tick's lock
 * still taken, short enough that the lock is free again when the next tick fires.
 */
const LOCK_AT_LEAST_FOR_MS = 500;
const PROBE_EVERY_MS = 250;
/**
 * The late replica: frozen (SIGSTOP) from this long before one tick until this long after it,
 * its timer fires that late, after the other replica has long finished the tick's report. Only
 * lockAtLeastFor still keeps it from running the tick a second time. The thaw leaves 350 ms
 * (of the 500) for this test process's own timers to be late on a loaded machine.
 */
const FREEZE_BEFORE_TICK_MS = 250;
const THAW_AFTER_TICK_MS = 150;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What one observation window saw. */
interface Observed {
  /** Every run recorded in the runs file, edges included. */
  runs: ReportRun[];
  /** The app processes' pids. */
  pids: number[];
  /** Ticks fired well inside the window, while both processes were up and scheduling. */
  middleTicks: number[];
  /** Liveness probes that did not get the expected answer. */
  probeFailures: string[];
  /** Liveness probe rounds completed (each probes every app). */
  probeRounds: number;
  /** Each process's output after it stopped, by pid. */
  outputs: Map<number, string>;
  /** With `lateReplica`: the tick the last app was frozen across, and when it actually was. */
  late?: { tick: number; pid: number; frozenAt: number; thawedAt: number };
}

/**
 * Starts one app per env in parallel, all scheduling the report every second on one SQLite
 * product store and appending to one runs file, watches for `windowMs` while probing each app
 * over HTTP, stops them and reads the file.
 */
async function observe(
  envs: ReadonlyArray<Record<string, string>>,
  windowMs: number,
  lateReplica = false,
): Promise<Observed> {
  const sqlite = tempSqliteFile();
  const runsFile = join(dirname(sqlite.file), 'report-runs.jsonl');
  const common = {
    ...CLEAN_APP_ENV,
    SQLITE_FILE: sqlite.file,
    REPORT_CRON: EVERY_SECOND,
    REPORT_LOCK_AT_LEAST_FOR_MS: String(LOCK_AT_LEAST_FOR_MS),
    REPORT_RUNS_FILE: runsFile,
  };
  const started = await Promise.allSettled(
    envs.map((env, i) => startApp(`cron${i}`, { ...common, ...env })),
  );
  const apps = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  try {
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    // Both have scheduled the job by now: Nest mounts @Cron jobs before it starts listening.
    const windowStart = Date.now();
    const [{ failures, rounds }, late] = await Promise.all([
      probeUntil(apps, windowStart + windowMs),
      // A tick well inside the window (the first counted one is a tick earlier).
      lateReplica
        ? makeLate(apps[apps.length - 1], Math.ceil(windowStart / TICK_MS) * TICK_MS + 2 * TICK_MS)
        : undefined,
    ]);
    const windowEnd = Date.now();
    await Promise.all(apps.map((app) => app.stop()));
    const middleTicks: number[] = [];
    // One tick of margin at each end: the first may have fired before the window opened, the
    // last may still be writing its line when the processes are stopped.
    const first = Math.ceil(windowStart / TICK_MS) * TICK_MS + TICK_MS;
    const last = Math.floor(windowEnd / TICK_MS) * TICK_MS - TICK_MS;
    for (let tick = first; tick <= last; tick += TICK_MS) middleTicks.push(tick);
    return {
      runs: await readReportRuns(runsFile),
      pids: apps.map((app) => app.pid),
      middleTicks,
      probeFailures: failures,
      probeRounds: rounds,
      outputs: new Map(apps.map((app) => [app.pid, app.output()])),
      late,
    };
  } finally {
    await Promise.all(apps.map((app) => app.stop()));
    sqlite.cleanup();
  }
}

/**
 * Asks every app for an unknown SKU every PROBE_EVERY_MS until `deadline`: a 404 proves the
 * process is alive and serving. Returns what did not answer 404.
 */
async function probeUntil(
  apps: readonly AppProcess[],
  deadline: number,
): Promise<{ failures: string[]; rounds: number }> {
  const failures: string[] = [];
  let rounds = 0;
  while (Date.now() < deadline) {
    await Promise.all(
      apps.map(async (app) => {
        try {
          const reply = await callJson('GET', `${app.url}/inventory/cron-probe`);
          if (reply.status !== 404) failures.push(`${app.name}: status ${reply.status}`);
        } catch (err) {
          failures.push(`${app.name}: ${(err as Error).message}`);
        }
      }),
    );
    rounds++;
    await sleep(Math.min(PROBE_EVERY_MS, Math.max(0, deadline - Date.now())));
  }
  return { failures, rounds };
}

/** Freezes `app` across `tick` (see FREEZE_BEFORE_TICK_MS), so that its timer fires late. */
async function makeLate(app: AppProcess, tick: number): Promise<NonNullable<Observed['late']>> {
  await sleep(tick - FREEZE_BEFORE_TICK_MS - Date.now());
  app.freeze();
  const frozenAt = Date.now();
  await sleep(tick + THAW_AFTER_TICK_MS - Date.now());
  app.thaw();
  return { tick, pid: app.pid, frozenAt, thawedAt: Date.now() };
}

/** Runs grouped by the tick they ran for (ms since the epoch). */
function byTick(runs: readonly ReportRun[]): Map<number, ReportRun[]> {
  const groups = new Map<number, ReportRun[]>();
  for (const run of runs) {
    const tick = Date.parse(run.tick);
    groups.set(tick, [...(groups.get(tick) ?? []), run]);
  }
  return groups;
}

/** The processes were up and answering for the whole window. */
function expectAliveThroughout(observed: Observed, windowMs: number): void {
  expect(observed.probeFailures).toEqual([]);
  expect(observed.probeRounds).toBeGreaterThanOrEqual(Math.floor(windowMs / (2 * PROBE_EVERY_MS)));
}

/** Lock store shared by the processes of the main case. */
let redis: RedisNode;
/** The two observations, started together in beforeAll (app startup dominates the run time). */
let shared: Promise<Observed>;
let control: Promise<Observed>;
const SHARED_WINDOW_MS = 7_000;
const CONTROL_WINDOW_MS = 4_000;

beforeAll(async () => {
  // A private Redis: the key `inventory:report-job` on a shared server could be held by
  // another run's app, which would make this run's processes skip ticks.
  redis = await startRedisNode();
  const sharedEnv = { LOCK_BACKEND: 'redis', REDIS_URL: redis.url, LOCK_RESTART_GUARD_MS: 'off' };
  shared = observe([sharedEnv, sharedEnv], SHARED_WINDOW_MS, true);
  control = observe([{ LOCK_BACKEND: 'memory' }, { LOCK_BACKEND: 'memory' }], CONTROL_WINDOW_MS);
  // Each is awaited by its test; until then a failure must not count as unhandled.
  shared.catch(() => undefined);
  control.catch(() => undefined);
}, 15_000);

afterAll(async () => {
  await Promise.allSettled([shared, control]);
  await stopAllApps(); // only does something if an observation failed halfway
  await redis?.stop();
}, 30_000);

describe('sample app: @Cron + @Locked(onBusy skip, lockAtLeastFor) in 2 processes', () => {
  it('runs every tick exactly once between them when they share the lock store', async () => {
    const observed = await shared;
    const ticks = byTick(observed.runs);

    expectAliveThroughout(observed, SHARED_WINDOW_MS);
    expect(observed.middleTicks.length).toBeGreaterThanOrEqual(5);
    for (const run of observed.runs) expect(observed.pids).toContain(run.pid);
    // Mutual exclusion, edges included: no tick ran twice.
    expect([...ticks.values()].filter((runs) => runs.length > 1)).toEqual([]);
    // And no tick was skipped by both.
    expect(observed.middleTicks.filter((tick) => !ticks.has(tick))).toEqual([]);
    // Each run held its own grant of the lock: fences strictly increase from tick to tick.
    const fences = [...observed.runs]
      .sort((a, b) => Date.parse(a.tick) - Date.parse(b.tick))
      .map((run) => run.fence);
    const increasing = fences.every(
      (fence, i) => fence !== null && (i === 0 || fence > (fences[i - 1] ?? fence)),
    );
    expect({ fences, increasing }).toEqual({ fences, increasing: true });
    // Each run also logged its line, in the process that ran it.
    for (const run of observed.runs) {
      expect(observed.outputs.get(run.pid)).toContain(`Report ${run.tick}:`);
    }
  }, 30_000);

  it('a replica whose timer fires late still skips the tick (lockAtLeastFor)', async () => {
    const { late, runs } = await shared;
    if (late === undefined) throw new Error('the shared observation made no replica late');
    // The scenario happened as planned: frozen before the tick, thawed well before the lock's
    // lockAtLeastFor ran out (else this run's own timers were too late to prove anything).
    expect(late.frozenAt).toBeLessThan(late.tick);
    expect(late.thawedAt).toBeGreaterThan(late.tick);
    expect(late.thawedAt).toBeLessThan(late.tick + LOCK_AT_LEAST_FOR_MS);
    // The tick ran once, on time, on the other replica; the late one found the lock taken.
    const tickRuns = runs.filter((run) => Date.parse(run.tick) === late.tick);
    expect(tickRuns.map((run) => run.pid === late.pid)).toEqual([false]);
    expect(tickRuns[0].startedAt).toBeLessThan(late.tick + THAW_AFTER_TICK_MS);
  });

  it('control: each process on its own in-process lock store runs every tick itself', async () => {
    const observed = await control;
    const ticks = byTick(observed.runs);

    expectAliveThroughout(observed, CONTROL_WINDOW_MS);
    expect(observed.middleTicks.length).toBeGreaterThanOrEqual(2);
    const expectedPids = [...observed.pids].sort((a, b) => a - b);
    for (const tick of observed.middleTicks) {
      const pids = (ticks.get(tick) ?? []).map((run) => run.pid).sort((a, b) => a - b);
      expect({ tick: new Date(tick).toISOString(), pids }).toEqual({
        tick: new Date(tick).toISOString(),
        pids: expectedPids,
      });
    }
  }, 30_000);
});
