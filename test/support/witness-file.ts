// The witness counter that multi-process tests read, bump and write inside critical sections.
// Written by replacing the file (temp file + rename), never in place: in place, two unexcluded
// writers interleave bytes (one writes "11", another truncates and writes "9": the file says "91"),
// and a known-unsafe run would report a count larger than the number of sections. With a rename,
// a reader always sees some whole value, so overlaps show only as lost updates.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

/** The counter's value (0 for an empty file). */
export function readWitness(file: string): number {
  return Number(readFileSync(file, 'utf8') || '0');
}

/** Replaces the counter's value atomically. */
export function writeWitness(file: string, value: number): void {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, String(value));
  renameSync(temp, file);
}
