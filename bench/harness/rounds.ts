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
 * Runs the variants in rounds. Within a round they take turns in short slices (20 ms), in a
 * new random order on each pass, so a slow second of a noisy machine (another tenant, a GC, a
 * flush) hits every variant alike instead of whichever had its turn, and no variant always
 * follows the same one; each round yields one rate per variant. Ratios between
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
    const random = seededRandom(round + 1);
    let order: number[] = [];
    while (performance.now() < roundEnd) {
      if (order.length === 0) order = shuffled(variants.length, random);
      const i = order.pop()!;
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

/**
 * 0, 1, ..., n - 1 in a random order. Each pass over the variants takes a new order: in a fixed
 * one, a variant always ran after the same neighbour, and one that ran after a variant on the
 * same code and connection ran up to 4 % faster than its exact copy placed elsewhere (caches
 * and branch predictors still warm from its neighbour).
 */
function shuffled(n: number, random: () => number): number[] {
  const out = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** A small seeded generator (mulberry32): the same orders on every run of a profile. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Median over rounds of `a`'s rate divided by `b`'s in the same round. */
export function pairedRatio(a: VariantRounds, b: VariantRounds): number {
  return median(a.perRound.map((rate, i) => rate / b.perRound[i]));
}
