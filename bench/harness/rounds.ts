import { median } from './stats';

/** One contender in a side-by-side comparison: a single operation, awaited in a loop. */
export interface Variant {
  name: string;
  op(): Promise<unknown>;
}

/** How long a comparison runs. */
export interface RoundsOptions {
  /** Rounds per variant; each reported figure is the median over rounds. */
  rounds: number;
  /** Time per variant in one round (spent in short alternating slices). */
  roundMs: number;
  /** Untimed run of each variant first (JIT, connection pools, server caches). */
  warmupMs: number;
}

/** What one variant did, round by round. */
export interface VariantRounds {
  name: string;
  /** Operations per second in each round, in round order. */
  perRound: number[];
  /** Median of `perRound`. */
  opsPerSec: number;
  /** Microseconds per operation at the median rate. */
  usPerOp: number;
}

/** One variant's share of a round, built up slice by slice. */
interface Tally {
  ops: number;
  ms: number;
}

/** Runs `variant` for about `ms` (at least one operation) and adds to its tally. */
async function runSlice(variant: Variant, ms: number, tally: Tally): Promise<void> {
  const start = performance.now();
  const end = start + ms;
  let now = start;
  do {
    await variant.op();
    tally.ops++;
    now = performance.now();
  } while (now < end);
  tally.ms += now - start;
}

/**
 * Runs the variants in rounds. Within a round they take turns in short slices (20 ms), so a
 * slow second of a noisy machine (another tenant, a GC, a flush) hits every variant alike
 * instead of whichever had its turn; each round yields one rate per variant. Ratios between
 * variants are then taken round by round ({@link pairedRatio}).
 */
export async function compareInterleaved(
  variants: readonly Variant[],
  options: RoundsOptions,
): Promise<VariantRounds[]> {
  for (const variant of variants) await runSlice(variant, options.warmupMs, { ops: 0, ms: 0 });
  const perRound = variants.map(() => [] as number[]);
  for (let round = 0; round < options.rounds; round++) {
    const tallies = variants.map(() => ({ ops: 0, ms: 0 }));
    const roundEnd = performance.now() + options.roundMs * variants.length;
    for (let turn = round; performance.now() < roundEnd; turn++) {
      const i = turn % variants.length;
      await runSlice(variants[i], SLICE_MS, tallies[i]);
    }
    tallies.forEach((t, i) => perRound[i].push(t.ops / (t.ms / 1000)));
  }
  return variants.map((variant, i) => {
    const opsPerSec = median(perRound[i]);
    return { name: variant.name, perRound: perRound[i], opsPerSec, usPerOp: 1e6 / opsPerSec };
  });
}

/** Length of one turn within a round. */
const SLICE_MS = 20;

/** Median over rounds of `a`'s rate divided by `b`'s in the same round. */
export function pairedRatio(a: VariantRounds, b: VariantRounds): number {
  return median(a.perRound.map((rate, i) => rate / b.perRound[i]));
}
