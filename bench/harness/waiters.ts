import { randomUUID } from 'node:crypto';
import { machineNowMs } from './clock';
import type { Section } from './contended-worker';
import type { LockModuleOptions } from '../../lib';
import { scaleModuleOptions, type ScaleStore } from './scale-store';
import { summarize, type Summary } from './stats';
import type { WaitersCommand, WaitersMessage, WaitersOrders } from './waiters-worker';
import { forkWorker, type WorkerProcess } from './worker-process';

/** What concurrent waiters on one key achieved. */
export interface WaitersRun {
  waiters: number;
  processes: number;
  /** Sections granted in the measured window. */
  sections: number;
  /** Sections per second. */
  opsPerSec: number;
  /** Asked → granted, ms, over the sections granted in the window. */
  waitMs: Summary;
  /** Sections per waiter in the window: fewest and most. */
  minPerWaiter: number;
  maxPerWaiter: number;
  /** Jain's fairness index over sections per waiter: 1 = all equal, 1/n = one took all. */
  jain: number;
}

/** What `waiters` concurrent waiters on one key of a scale-suite store achieved. */
export interface WaitersResult extends WaitersRun {
  store: ScaleStore['kind'];
}

/** Processes the waiters are spread over (each store but memory: locks across processes). */
const MAX_PROCESSES = 4;
/** The short critical section every waiter runs. */
export const WAITER_HOLD_MS = 1;
/** Waiters' defaults: long enough that no waiter gives up while 1,000 take turns before it. */
export const WAITER_DEFAULTS = { waitTimeout: 300_000, ttl: 30_000 } as const;
const READY_TIMEOUT_MS = 60_000;

/**
 * Spreads `waiters` waiters over up to {@link MAX_PROCESSES} processes (one for memory, whose
 * locks live in one process), lets them take the key in turn for `durationMs` and merges their
 * timelines; the first 10% is ramp-up and left out.
 */
export async function runWaiters(
  store: ScaleStore,
  waiters: number,
  durationMs: number,
): Promise<WaitersResult> {
  const processes = store.kind === 'memory' ? 1 : Math.min(waiters, MAX_PROCESSES);
  const prefix = `scale:w:${randomUUID().slice(0, 8)}:`;
  const options = scaleModuleOptions(store, WAITER_DEFAULTS, prefix);
  return { store: store.kind, ...(await runWaitersOn(options, waiters, processes, durationMs)) };
}

/**
 * `waiters` waiters on one key, spread over `processes` worker processes that each boot
 * `LockModule.forRoot(options)` (plain JSON: it crosses to the worker), taking the key in turn
 * for `durationMs`; their timelines merged, the first 10% left out as ramp-up.
 */
export async function runWaitersOn(
  options: LockModuleOptions,
  waiters: number,
  processes: number,
  durationMs: number,
): Promise<WaitersRun> {
  const workers: WorkerProcess<WaitersMessage>[] = [];
  try {
    for (let p = 0; p < processes; p++) {
      const orders: WaitersOrders = {
        options,
        key: 'one-key',
        loops: Math.floor(waiters / processes) + (p < waiters % processes ? 1 : 0),
        holdMs: WAITER_HOLD_MS,
      };
      workers.push(forkWorker<WaitersMessage>('bench/harness/waiters-worker.ts', orders));
    }
    await Promise.all(workers.map((w) => w.next('ready', READY_TIMEOUT_MS)));
    const goAt = machineNowMs();
    const endAt = goAt + durationMs * 1.1;
    for (const w of workers) w.child.send({ type: 'go', endAt } satisfies WaitersCommand);
    // After endAt every waiter still in line gets its turn before its loop ends.
    const done = await Promise.all(
      workers.map((w) => w.next('done', durationMs * 1.1 + waiters * 100 + READY_TIMEOUT_MS)),
    );
    return analyse(
      processes,
      done.flatMap((d) => d.sections),
      goAt + durationMs * 0.1,
      endAt,
    );
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
  }
}

function analyse(processes: number, perWaiter: Section[][], from: number, to: number): WaitersRun {
  const all = perWaiter.flat().sort((a, b) => a[1] - b[1]);
  for (let i = 1; i < all.length; i++) {
    // A grant before the previous holder sent its release would be two holders at once.
    if (all[i][1] < all[i - 1][2]) {
      throw new Error(`waiters: two holders at once (sections ${i - 1} and ${i})`);
    }
  }
  const inWindow = (s: Section): boolean => s[1] >= from && s[1] < to;
  const counts = perWaiter.map((sections) => sections.filter(inWindow).length);
  const sum = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  const window = all.filter(inWindow);
  return {
    waiters: perWaiter.length,
    processes,
    sections: window.length,
    opsPerSec: window.length / ((to - from) / 1000),
    waitMs: summarize(window.map((s) => s[1] - s[0])),
    minPerWaiter: Math.min(...counts),
    maxPerWaiter: Math.max(...counts),
    jain: squares === 0 ? NaN : (sum * sum) / (counts.length * squares),
  };
}
