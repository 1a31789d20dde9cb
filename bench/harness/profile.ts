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
}

/**
 * `quick` finishes in under two minutes on the 2-core machines; `full` gives tighter medians;
 * `smoke` only proves every suite still runs (the test suite uses it; its figures mean nothing).
 */
export const PROFILES: Record<Profile['name'], Profile> = {
  quick: { name: 'quick', rounds: 3, roundMs: 500, warmupMs: 250, contendedMs: 3_000, orders: 300 },
  full: {
    name: 'full',
    rounds: 9,
    roundMs: 1_500,
    warmupMs: 1_000,
    contendedMs: 10_000,
    orders: 1_500,
  },
  smoke: { name: 'smoke', rounds: 1, roundMs: 100, warmupMs: 50, contendedMs: 500, orders: 40 },
};
