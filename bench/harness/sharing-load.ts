import { randomUUID } from 'node:crypto';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { machineNowMs } from './clock';
import type { Profile } from './profile';
import type { SharingContender } from './sharing-contenders';
import type {
  SharingCommand,
  SharingMessage,
  SharingOrders,
  SharingSection,
} from './sharing-worker';
import { summarize, type Summary } from './stats';
import { forkWorker, type WorkerProcess } from './worker-process';

/** A load on one key shared by many workers: who, how many, how long each holds. */
export interface SharingLoad {
  contender: SharingContender;
  /** Concurrent workers on the key, spread over processes (one process for memory). */
  workers: number;
  /** Processes the workers are spread over, at most (memory: always one). */
  processes: number;
  holdMs: number;
  /** Each worker's pause between a release and its next request (0: none). */
  thinkMs: number;
  /** Fraction of requests that are writes (exclusive); 1 for a counted lock. */
  writeShare: number;
  /** Measured window; the first 10% after "go" is left out as ramp-up. */
  durationMs: number;
  redisUrl: string;
}

/** What a sharing run measured. */
export interface SharingResult {
  contender: SharingContender;
  workers: number;
  processes: number;
  /** Each worker's pause between a release and its next request, ms (the load's). */
  thinkMs: number;
  /** Sections granted in the measured window, and per second. */
  sections: number;
  opsPerSec: number;
  /** Of which writes, per second. */
  writesPerSec: number;
  meanHoldMs: number;
  /** Asked → granted, ms: every section's, and the writes' alone. */
  waitMs: Summary;
  writeWaitMs: Summary;
  /**
   * Most holders seen at once over the whole run, from each section's [granted, release sent]
   * (inside the true hold, so a count above the lock's limit is a real over-admission).
   */
  maxHolders: number;
  /**
   * Grants made beside a write (see {@link holdersAtOnce}): must be 0 where writes are
   * exclusive among shared reads (a counted lock's requests are all "writes" up to `permits`).
   */
  writerOverlaps: number;
  /** Sections per worker in the window: fewest and most. */
  minPerWorker: number;
  maxPerWorker: number;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * Runs `load`: forks the processes, lets every worker take the key for `durationMs`, merges
 * their timelines and counts the holders at each instant.
 */
export async function runSharingLoad(load: SharingLoad): Promise<SharingResult> {
  const inProcess = load.contender.kind === 'ours' && load.contender.store === 'memory';
  const processes = inProcess ? 1 : Math.min(load.workers, load.processes);
  const key = `bench-sharing-${randomUUID().slice(0, 8)}`;
  const workers: WorkerProcess<SharingMessage>[] = [];
  try {
    for (let p = 0; p < processes; p++) {
      const orders: SharingOrders = {
        contender: load.contender,
        redisUrl: load.redisUrl,
        key,
        loops: Math.floor(load.workers / processes) + (p < load.workers % processes ? 1 : 0),
        holdMs: load.holdMs,
        thinkMs: load.thinkMs,
        writeShare: load.writeShare,
      };
      workers.push(forkWorker<SharingMessage>('bench/harness/sharing-worker.ts', orders));
    }
    await Promise.all(workers.map((w) => w.next('ready', READY_TIMEOUT_MS)));
    const goAt = machineNowMs();
    const endAt = goAt + load.durationMs * 1.1;
    for (const w of workers) w.child.send({ type: 'go', endAt } satisfies SharingCommand);
    const done = await Promise.all(
      workers.map((w) => w.next('done', load.durationMs * 1.1 + READY_TIMEOUT_MS)),
    );
    const perWorker = done.flatMap((d) => d.sections);
    return analyse(load, processes, perWorker, goAt + load.durationMs * 0.1, endAt);
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
  }
}

function analyse(
  load: SharingLoad,
  processes: number,
  perWorker: SharingSection[][],
  from: number,
  to: number,
): SharingResult {
  const all = perWorker.flat();
  const inWindow = (s: SharingSection): boolean => s[1] >= from && s[1] < to;
  const window = all.filter(inWindow);
  const writes = window.filter((s) => s[4] === 1);
  const counts = perWorker.map((sections) => sections.filter(inWindow).length);
  const seconds = (to - from) / 1000;
  return {
    contender: load.contender,
    workers: load.workers,
    processes,
    thinkMs: load.thinkMs,
    sections: window.length,
    opsPerSec: window.length / seconds,
    writesPerSec: writes.length / seconds,
    meanHoldMs: window.reduce((sum, s) => sum + (s[2] - s[1]), 0) / (window.length || 1),
    waitMs: summarize(window.map((s) => s[1] - s[0])),
    writeWaitMs: summarize(writes.map((s) => s[1] - s[0])),
    ...holdersAtOnce(all),
    minPerWorker: Math.min(...counts),
    maxPerWorker: Math.max(...counts),
  };
}

/**
 * The most sections held at once, and the grants made beside a write (a write granted while
 * anything was held, or anything granted while a write was held): a sweep over every section's
 * [grant, release sent], a release counted before a grant at the same instant (a hand-over is
 * not an overlap).
 */
export function holdersAtOnce(sections: readonly SharingSection[]): {
  maxHolders: number;
  writerOverlaps: number;
} {
  const edges = sections.flatMap((s) => [
    { t: s[1], delta: 1, write: s[4] },
    { t: s[2], delta: -1, write: s[4] },
  ]);
  edges.sort((a, b) => a.t - b.t || a.delta - b.delta);
  let holders = 0;
  let writers = 0;
  let maxHolders = 0;
  let writerOverlaps = 0;
  for (const edge of edges) {
    if (edge.delta > 0 && (writers > 0 || (edge.write === 1 && holders > 0))) writerOverlaps++;
    holders += edge.delta;
    writers += edge.write * edge.delta;
    maxHolders = Math.max(maxHolders, holders);
  }
  return { maxHolders, writerOverlaps };
}

/** The run with the median throughput of repeated runs (a noisy machine's outliers dropped). */
export function medianSharingRun(runs: readonly SharingResult[]): SharingResult {
  const sorted = [...runs].sort((a, b) => a.opsPerSec - b.opsPerSec);
  return sorted[(sorted.length - 1) >> 1];
}

/**
 * Runs every contender through the same work on one key of the bench Redis (`setup`'s workers,
 * processes and window; `work`'s hold and writes), `setup.repeats` times taking turns (a slow
 * stretch of the machine hits them alike); returns every run and the median of each, in the
 * order given.
 */
export async function runSharingLoads(
  contenders: readonly SharingContender[],
  work: Pick<SharingLoad, 'holdMs' | 'thinkMs' | 'writeShare'>,
  setup: SharingSetup,
): Promise<{ runs: SharingResult[][]; results: SharingResult[] }> {
  const runs: SharingResult[][] = contenders.map(() => []);
  for (let i = 0; i < setup.repeats; i++) {
    for (const [j, contender] of contenders.entries()) {
      runs[j].push(
        await runSharingLoad({
          contender,
          ...work,
          workers: setup.workers,
          processes: setup.processes,
          durationMs: setup.durationMs,
          redisUrl: MACHINE_REDIS_URL,
        }),
      );
    }
  }
  return { runs, results: runs.map(medianSharingRun) };
}

/** How many workers a sharing suite runs, over how many processes, how long, how often. */
export interface SharingSetup {
  workers: number;
  processes: number;
  /** Measured window of one run, ms. */
  durationMs: number;
  /** Runs per contender, taken in turns; the median run is reported. */
  repeats: number;
}

/**
 * How the sharing suites run in a profile: the 16 workers over 4 processes, except in
 * smoke, which only proves the suites run (8 workers over 2 processes still contend, at half the
 * process start-ups); 3 runs each in the full profile.
 */
export function sharingSetup(profile: Profile): SharingSetup {
  const smoke = profile.name === 'smoke';
  return {
    workers: smoke ? 8 : 16,
    processes: smoke ? 2 : 4,
    durationMs: profile.contendedMs,
    repeats: profile.name === 'full' ? 3 : 1,
  };
}
