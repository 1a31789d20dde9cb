/**
 * The demo's leadership step: two app processes schedule the stock report every second under
 * `@LeaderOnly('report')` (sample-app/app/report-job.ts). One leads and runs every tick; after
 * 3 s it is killed (SIGKILL, as a crash), and the other leads once the leadership's lease has
 * run out and runs the ticks from then on, under a higher term. The evidence is the runs file
 * both append to (one JSON line per run: tick, pid, term).
 */
import { join } from 'node:path';
import { startApp, type AppProcess } from './app-process';
import { readReportRuns, type ReportRun } from './report-runs-reader';
import { renderTable } from './verdict-table';

/** The report leadership's lease in this step. */
const LEADER_TTL_MS = 2_000;
/** How long the first leader runs before it is killed, and how long the step watches after. */
const BEFORE_CRASH_MS = 3_200;
const AFTER_CRASH_MS = 4_500;

/** One sentence for the demo's introduction. */
export const LEADER_INTRO =
  'Then a scheduled report on 2 processes under @LeaderOnly: one leads and runs every tick; ' +
  'it is killed, and the other takes over.';

/** What the step saw. */
export interface LeaderOutcome {
  runs: ReportRun[];
  /** The first leader's pid, killed at `crashedAt` (ms since the epoch). */
  crashedPid: number;
  crashedAt: number;
  survivorPid: number;
}

/** Runs the step in `dir` with the demo's app environment. */
export async function runLeaderStep(
  dir: string,
  env: Record<string, string>,
): Promise<LeaderOutcome> {
  const runsFile = join(dir, 'report-runs.jsonl');
  const reportEnv = {
    ...env,
    REPORT_CRON: '* * * * * *',
    REPORT_LEADER_TTL_MS: String(LEADER_TTL_MS),
    REPORT_RUNS_FILE: runsFile,
  };
  const apps: AppProcess[] = await Promise.all(
    [0, 1].map((i) => startApp(`report#${i}`, reportEnv)),
  );
  try {
    await sleep(BEFORE_CRASH_MS);
    const leaderPid = (await readReportRuns(runsFile)).at(-1)?.pid;
    const leader = apps.find((app) => app.pid === leaderPid);
    if (!leader) throw new Error('no report ran in the leadership step');
    await leader.crash();
    const crashedAt = Date.now();
    await sleep(AFTER_CRASH_MS);
    const survivor = apps.find((app) => app !== leader)!;
    await survivor.stop();
    return {
      runs: await readReportRuns(runsFile),
      crashedPid: leader.pid,
      crashedAt,
      survivorPid: survivor.pid,
    };
  } finally {
    await Promise.all(apps.map((app) => app.stop()));
  }
}

/** One row per tick: who ran it, under which term. */
export function leaderTable(outcome: LeaderOutcome): string {
  const rows = outcome.runs.map((run) => [
    run.tick.slice(11, 19),
    run.pid === outcome.crashedPid ? 'first leader' : 'second leader',
    run.pid,
    run.term ?? '-',
  ]);
  return renderTable(['tick', 'ran on', 'pid', 'term'], rows);
}

/** What the step shows, and whether it passed: every tick at most once, a take-over in bounds. */
export function explainLeader(outcome: LeaderOutcome): { lines: string[]; pass: boolean } {
  const ticks = new Map<string, number>();
  for (const run of outcome.runs) ticks.set(run.tick, (ticks.get(run.tick) ?? 0) + 1);
  const twice = [...ticks.values()].filter((n) => n > 1).length;
  const first = outcome.runs.filter((r) => r.pid === outcome.crashedPid);
  const second = outcome.runs.filter((r) => r.pid === outcome.survivorPid);
  const takeover = second.length > 0 ? second[0].startedAt - outcome.crashedAt : Infinity;
  const rising =
    first.length > 0 && second.length > 0 && second[0].term! > first[first.length - 1].term!;
  const before = second.every((r) => r.startedAt > outcome.crashedAt);
  const pass =
    twice === 0 &&
    first.length >= 2 &&
    second.length >= 2 &&
    rising &&
    before &&
    takeover <= LEADER_TTL_MS + 1_000 + 1_000;
  return {
    lines: [
      `Leadership: ${first.length} ticks on the first leader, then it was killed; the other ` +
        `process ran its first tick ${(takeover / 1000).toFixed(1)} s later (lease ${LEADER_TTL_MS / 1000} s), ` +
        `under a higher term: ${rising ? 'yes' : 'NO'}; ticks run twice: ${twice}.`,
    ],
    pass,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
