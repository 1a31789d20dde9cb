/** What the runner passes every suite beside its profile (`npm run bench -- --sharing-store`). */
export interface SuiteOptions {
  /**
   * Where the sharing suites (semaphore, read-write) run our counted and shared locks: Redis
   * (the default, what their targets are about), or memory only, in one process: the in-process
   * reference, runnable on a build whose Redis backend does not grant them yet.
   */
  sharingStore: 'redis' | 'memory';
}

/** How long and how often each suite measures. */
export interface Profile {
  name: 'quick' | 'full' | 'smoke';
  /** Interleaved rounds per variant (each figure is a median over rounds). */
  rounds: number;
  /** One variant's turn in a round. */
  roundMs: number;
  warmupMs: number;
  /** Length of one contended hand-off run (measured after every worker is ready). */
  contendedMs: number;
  /** Orders per sample-app run. */
  orders: number;
  /** The scale suite's sizes and windows (issue 18, item 5). */
  scale: ScaleProfile;
  /** The contended SQL suite's sizes and windows (issue 18, item 3). */
  sqlContended: SqlContendedProfile;
}

/** How far the contended SQL suite goes. */
export interface SqlContendedProfile {
  /** Worker processes taking one key in turn (one waiter each). */
  workers: number;
  /** Length of one hand-off run, ms (the first 10% is left out as ramp-up). */
  handoffMs: number;
  /** Concurrent waiters on one key in one process, for the connections they pin. */
  waiters: number;
  /** Length of one waiters run, ms. */
  waitersMs: number;
}

/** How far the scale suite goes: the sizes it measures, and how long it watches each. */
export interface ScaleProfile {
  /** Locks held at once on Redis and memory. */
  held: number[];
  /** Locks held at once on the PostgreSQL table strategy (each renewal is a committed UPDATE). */
  heldSql: number[];
  /** Steady window measured after all locks are held, ms. */
  heldWindowMs: number;
  /** Concurrent waiters on one key. */
  waiters: number[];
  /** Length of one waiters run, ms (the first 10% is left out as ramp-up). */
  waitersMs: number;
  /** Distinct keys each locked and released once. */
  keys: number[];
}

/**
 * The scale suite's tiny version (quick and smoke): 1k held locks, 10 waiters, 1k keys, each
 * watched for `windowMs`.
 */
function smallScale(windowMs: number): ScaleProfile {
  return {
    held: [1_000],
    heldSql: [1_000],
    heldWindowMs: windowMs,
    waiters: [10],
    waitersMs: windowMs,
    keys: [1_000],
  };
}

/**
 * `quick` finishes in under two minutes on the 2-core machines; `full` gives tighter medians;
 * `smoke` only proves every suite still runs (the test suite uses it; its figures mean nothing).
 */
export const PROFILES: Record<Profile['name'], Profile> = {
  quick: {
    name: 'quick',
    rounds: 3,
    roundMs: 500,
    warmupMs: 250,
    contendedMs: 3_000,
    orders: 300,
    scale: smallScale(3_000),
    sqlContended: { workers: 4, handoffMs: 3_000, waiters: 32, waitersMs: 3_000 },
  },
  full: {
    name: 'full',
    rounds: 9,
    roundMs: 1_500,
    warmupMs: 1_000,
    contendedMs: 10_000,
    orders: 1_500,
    scale: {
      held: [1_000, 10_000, 100_000],
      heldSql: [1_000, 10_000],
      heldWindowMs: 10_000,
      waiters: [1, 10, 100, 1_000],
      waitersMs: 10_000,
      keys: [1_000, 100_000],
    },
    sqlContended: { workers: 4, handoffMs: 8_000, waiters: 32, waitersMs: 6_000 },
  },
  smoke: {
    name: 'smoke',
    rounds: 1,
    roundMs: 100,
    warmupMs: 50,
    contendedMs: 500,
    orders: 40,
    scale: smallScale(1_000),
    // Two workers still hand the key over, at half the process start-ups.
    sqlContended: { workers: 2, handoffMs: 400, waiters: 32, waitersMs: 400 },
  },
};
