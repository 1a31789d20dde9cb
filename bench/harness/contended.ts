import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { machineNowMs } from './clock';
import type { ContenderName, ServerAddresses } from './contenders';
import type { Profile } from './profile';
import type { RunnerMessage, WorkerMessage, WorkerOrders } from './contended-worker';
import { summarize, type Summary } from './stats';

/** A contended hand-off run: `workers` processes on one key. */
export interface ContendedOptions {
  contender: ContenderName;
  servers: ServerAddresses;
  workers: number;
  holdMs: number;
  thinkMs: number;
  /** Measured window; the first 10% after "go" is left out as ramp-up. */
  durationMs: number;
  /** One store round trip (median), for the ideal rate 1 / (hold + round trip). */
  roundTripMs: number;
}

/** What a contended run measured. */
export interface ContendedResult {
  contender: ContenderName;
  sections: number;
  opsPerSec: number;
  /** 1000 / (mean measured hold + round trip). */
  idealOpsPerSec: number;
  fractionOfIdeal: number;
  meanHoldMs: number;
  waitMs: Summary;
  /** From a release being sent to the next grant arriving: the time the lock sat idle. */
  idleGapMs: Summary;
  /** The holder's release call, sent to answered. */
  releaseMs: Summary;
  /** Sections per worker (min..max): how fair the hand-off was. */
  perWorker: number[];
  /**
   * SQL contenders: statements all workers sent per section, over the whole run (failed
   * tries of polling waiters included); absent for the others.
   */
  statementsPerSection?: number;
}

const READY_TIMEOUT_MS = 60_000;

/** Forks the workers, lets them contend for `durationMs`, and merges their timelines. */
export async function runContended(options: ContendedOptions): Promise<ContendedResult> {
  const key = `bench-contended-${options.contender}-${randomUUID().slice(0, 8)}`;
  const orders: WorkerOrders = {
    contender: options.contender,
    servers: options.servers,
    key,
    holdMs: options.holdMs,
    thinkMs: options.thinkMs,
  };
  const children: ChildProcess[] = [];
  try {
    const ready: Promise<void>[] = [];
    const done: Promise<WorkerReport>[] = [];
    for (let i = 0; i < options.workers; i++) {
      const child = fork(
        join(process.cwd(), 'bench/harness/contended-worker.ts'),
        [JSON.stringify(orders)],
        {
          execArgv: ['-r', join(process.cwd(), 'scripts/ts-register.cjs')],
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        },
      );
      children.push(child);
      const messages = listen(child);
      ready.push(messages.ready);
      done.push(messages.done);
    }
    await withDeadline(Promise.all(ready), READY_TIMEOUT_MS, 'workers did not get ready');
    const goAt = machineNowMs();
    const endAt = goAt + options.durationMs * 1.1;
    for (const child of children) child.send({ type: 'go', endAt } satisfies RunnerMessage);
    const all = await withDeadline(
      Promise.all(done),
      options.durationMs * 1.1 + READY_TIMEOUT_MS,
      'workers did not finish',
    );
    return analyse(options, all, goAt + options.durationMs * 0.1, endAt);
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

/** What a worker reported when done. */
type WorkerReport = Omit<Extract<WorkerMessage, { type: 'done' }>, 'type'>;

function listen(child: ChildProcess): { ready: Promise<void>; done: Promise<WorkerReport> } {
  let markReady!: () => void;
  let fail!: (err: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    fail = reject;
  });
  const done = new Promise<WorkerReport>((resolve, reject) => {
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') markReady();
      else if (message.type === 'done') resolve(message);
      else {
        const err = new Error(`worker ${child.pid} failed: ${message.error}`);
        fail(err);
        reject(err);
      }
    });
    child.once('exit', (code) => {
      const err = new Error(`worker ${child.pid} exited (${code}) before reporting`);
      fail(err);
      reject(err);
    });
  });
  ready.catch(() => undefined);
  done.catch(() => undefined);
  return { ready, done };
}

async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function analyse(
  options: ContendedOptions,
  reports: WorkerReport[],
  from: number,
  to: number,
): ContendedResult {
  const perWorker = reports.map((r) => r.sections);
  const all = perWorker.flat().sort((a, b) => a[1] - b[1]);
  for (let i = 1; i < all.length; i++) {
    // The merged timeline doubles as a mutual-exclusion check: a grant before the previous
    // holder sent its release would be an overlap, and the bench's figures would be meaningless.
    if (all[i][1] < all[i - 1][2]) {
      throw new Error(`${options.contender}: two holders at once (sections ${i - 1} and ${i})`);
    }
  }
  const inWindow = all.filter((s) => s[1] >= from && s[1] < to);
  const gaps: number[] = [];
  for (let i = 1; i < all.length; i++) {
    if (all[i][1] >= from && all[i][1] < to) gaps.push(all[i][1] - all[i - 1][2]);
  }
  const meanHoldMs = inWindow.reduce((sum, s) => sum + (s[2] - s[1]), 0) / inWindow.length;
  const opsPerSec = inWindow.length / ((to - from) / 1000);
  const idealOpsPerSec = 1000 / (meanHoldMs + options.roundTripMs);
  return {
    contender: options.contender,
    sections: inWindow.length,
    opsPerSec,
    idealOpsPerSec,
    fractionOfIdeal: opsPerSec / idealOpsPerSec,
    meanHoldMs,
    waitMs: summarize(inWindow.map((s) => s[1] - s[0])),
    idleGapMs: summarize(gaps),
    releaseMs: summarize(inWindow.map((s) => s[3] - s[2])),
    perWorker: perWorker.map(
      (sections) => sections.filter((s) => s[1] >= from && s[1] < to).length,
    ),
    ...(reports.every((r) => r.statements !== undefined)
      ? {
          statementsPerSection:
            reports.reduce((sum, r) => sum + (r.statements ?? 0), 0) / (all.length || 1),
        }
      : {}),
  };
}

/** The run with the median throughput of repeated runs (a noisy machine's outliers dropped). */
export function medianRun(runs: readonly ContendedResult[]): ContendedResult {
  const sorted = [...runs].sort((a, b) => a.opsPerSec - b.opsPerSec);
  return sorted[(sorted.length - 1) >> 1];
}

/** The hand-off setup: 8 worker processes on one key, each holding 2 ms, thinking 1 ms. */
export const HANDOFF = { workers: 8, holdMs: 2, thinkMs: 1 } as const;

/** How a suite's contended hand-off runs: processes, section timing, run length and repeats. */
export interface HandoffSetup {
  workers: number;
  holdMs: number;
  thinkMs: number;
  /** Measured window of one run (see {@link ContendedOptions.durationMs}). */
  durationMs: number;
  /** Runs per contender, taken in turns; the median run is reported. */
  repeats: number;
}

/**
 * The hand-off setup a profile runs: the 8 workers, except in the smoke profile, which
 * only proves the suites run (3 workers still contend, at a fraction of the process start-ups);
 * 3 runs each in the full profile.
 */
export function handoffFor(profile: Profile): HandoffSetup {
  return {
    ...HANDOFF,
    workers: profile.name === 'smoke' ? 3 : HANDOFF.workers,
    durationMs: profile.contendedMs,
    repeats: profile.name === 'full' ? 3 : 1,
  };
}

/** Every contender's hand-off runs, and the median run of each. */
export interface HandoffRuns {
  /** Runs per contender (`setup.repeats` each). */
  runs: Record<string, ContendedResult[]>;
  /** The median run of each contender, in the order given. */
  results: ContendedResult[];
  repeats: number;
}

/**
 * Runs each contender through `setup`, taking turns (ours, peer, peer, ours, ...) so a slow
 * stretch of the machine hits them alike. `roundTripMs`: one store round trip, for the ideal
 * rate; a function when the contenders talk to different stores.
 */
export async function runHandoffs<N extends ContenderName>(
  contenders: readonly N[],
  servers: ServerAddresses,
  roundTripMs: number | ((contender: N) => number),
  setup: HandoffSetup,
): Promise<HandoffRuns> {
  const runs: Record<string, ContendedResult[]> = {};
  for (let i = 0; i < setup.repeats; i++) {
    for (const contender of contenders) {
      (runs[contender] ??= []).push(
        await runContended({
          contender,
          servers,
          workers: setup.workers,
          holdMs: setup.holdMs,
          thinkMs: setup.thinkMs,
          durationMs: setup.durationMs,
          roundTripMs: typeof roundTripMs === 'number' ? roundTripMs : roundTripMs(contender),
        }),
      );
    }
  }
  return {
    runs,
    results: contenders.map((c) => medianRun(runs[c])),
    repeats: setup.repeats,
  };
}
