// The sample app's scheduled report (sample-app/app/report-job.ts: @Cron + @LeaderOnly) in two
// real app processes firing every second: with one shared lock store each tick runs exactly
// once between them, always on the same process while it leads; when that process crashes the
// other leads within the leadership's lease plus a second and runs every tick from then on,
// under a higher term. The control runs the same two processes each on its own in-process lock
// store, and every tick then runs twice: the assertions would catch a leadership that did not
// exclude. Evidence is the runs file both processes append to (one JSON line per run, with the
// tick it ran for, its pid and term), read after they have stopped, so nothing depends on
// stdout ordering.
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
/** The report leadership's lease: how long a crashed leader's ticks can go unrun. */
const LEADER_TTL_MS = 2_000;
const PROBE_EVERY_MS = 250;
/**
 * When, into the shared window, its leader is crashed: late enough that two whole ticks of the
 * window (the first one skipped as a margin) fall a tick before the crash, whatever the phase of
 * the window against the second (with 3.5 s, a window opening early in its second had only one).
 */
const CRASH_AFTER_MS = 4_500;

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
  /** With `crashLeader`: the leader's pid and when it was killed. */
  crash?: { pid: number; at: number };
}

/**
 * Starts one app per env in parallel, all scheduling the report every second on one SQLite
 * product store and appending to one runs file, watches for `windowMs` while probing each app
 * over HTTP, stops them and reads the file.
 */
async function observe(
  envs: ReadonlyArray<Record<string, string>>,
  windowMs: number,
  crashLeader = false,
): Promise<Observed> {
  const sqlite = tempSqliteFile();
  const runsFile = join(dirname(sqlite.file), 'report-runs.jsonl');
  const common = {
    ...CLEAN_APP_ENV,
    SQLITE_FILE: sqlite.file,
    REPORT_CRON: EVERY_SECOND,
    REPORT_LEADER_TTL_MS: String(LEADER_TTL_MS),
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
    const alive = new Set(apps);
    const [{ failures, rounds }, crash] = await Promise.all([
      probeUntil(alive, windowStart + windowMs),
      crashLeader ? crashTheLeader(alive, runsFile, windowStart + CRASH_AFTER_MS) : undefined,
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
      crash,
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
  apps: ReadonlySet<AppProcess>,
  deadline: number,
): Promise<{ failures: string[]; rounds: number }> {
  const failures: string[] = [];
  let rounds = 0;
  while (Date.now() < deadline) {
    await Promise.all(
      [...apps].map(async (app) => {
        try {
          const reply = await callJson('GET', `${app.url}/inventory/cron-probe`);
          if (reply.status !== 404) failures.push(`${app.name}: status ${reply.status}`);
        } catch (err) {
          // A process crashed on purpose meanwhile is not a failure.
          if (apps.has(app)) failures.push(`${app.name}: ${(err as Error).message}`);
        }
      }),
    );
    rounds++;
    await sleep(Math.min(PROBE_EVERY_MS, Math.max(0, deadline - Date.now())));
  }
  return { failures, rounds };
}

/** At `at`, SIGKILLs the app that ran the latest report (the leader), taking it off `alive`. */
async function crashTheLeader(
  alive: Set<AppProcess>,
  runsFile: string,
  at: number,
): Promise<NonNullable<Observed['crash']>> {
  await sleep(at - Date.now());
  const runs = await readReportRuns(runsFile);
  const leader = [...alive].find((app) => app.pid === runs.at(-1)?.pid);
  if (!leader) throw new Error(`no leader to crash: ${runs.length} runs so far`);
  alive.delete(leader);
  await leader.crash();
  return { pid: leader.pid, at: Date.now() };
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
/** Long enough for two whole ticks after the takeover (crash + lease + a tick), and a margin. */
const SHARED_WINDOW_MS = 13_000;
const CONTROL_WINDOW_MS = 4_000;

beforeAll(async () => {
  // A private Redis: the report's leadership on a shared server could be held by another run's
  // app, which would make this run's processes skip ticks.
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

describe('sample app: @Cron + @LeaderOnly in 2 processes', () => {
  it('runs every tick exactly once, on the leader, and on the other process after the leader crashes', async () => {
    const observed = await shared;
    const ticks = byTick(observed.runs);
    const crash = observed.crash;
    if (crash === undefined) throw new Error('the shared observation crashed no leader');

    expect(observed.probeFailures).toEqual([]);
    expect(observed.middleTicks.length).toBeGreaterThanOrEqual(7);
    for (const run of observed.runs) expect(observed.pids).toContain(run.pid);
    // Mutual exclusion, edges included: no tick ran twice.
    expect([...ticks.values()].filter((runs) => runs.length > 1)).toEqual([]);
    // Before the crash, every tick ran, all on the one leader (sticky) under one term.
    const before = observed.middleTicks.filter((tick) => tick < crash.at - TICK_MS);
    expect(before.length).toBeGreaterThanOrEqual(2);
    expect(before.map((tick) => ticks.get(tick)?.[0]?.pid)).toEqual(before.map(() => crash.pid));
    const oldTerms = new Set(before.map((tick) => ticks.get(tick)![0].term));
    expect(oldTerms.size).toBe(1);
    // After it, the other process leads within the lease plus a second, and runs every tick
    // from then on under a higher term.
    const takeover = crash.at + LEADER_TTL_MS + TICK_MS;
    const after = observed.middleTicks.filter((tick) => tick > takeover);
    expect(after.length).toBeGreaterThanOrEqual(2);
    const survivor = observed.pids.find((pid) => pid !== crash.pid);
    expect(after.map((tick) => ticks.get(tick)?.[0]?.pid)).toEqual(after.map(() => survivor));
    for (const tick of after) {
      expect(ticks.get(tick)![0].term!).toBeGreaterThan([...oldTerms][0]!);
    }
    // Each run also logged its line, in the process that ran it.
    for (const run of observed.runs) {
      expect(observed.outputs.get(run.pid)).toContain(`Report ${run.tick}:`);
    }
  }, 40_000);

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
