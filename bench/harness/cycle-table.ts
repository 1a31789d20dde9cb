import { pairedRatio, type VariantRounds } from './rounds';
import { fmt, type BenchTable } from './result';

/** An uncontended-cycle table: each variant's rate and time, and ours over it, round by round. */
export function cycleTable(
  title: string,
  results: readonly VariantRounds[],
  ours: VariantRounds,
  note: string,
): BenchTable {
  return {
    title,
    columns: ['Variant', 'cycles/s', 'µs/cycle', 'ours ÷ this'],
    rows: results.map((r) => [
      r.name,
      fmt(r.opsPerSec),
      fmt(r.usPerOp),
      r === ours ? '1' : fmt(pairedRatio(ours, r)),
    ]),
    note,
  };
}
