// Shared-file witnesses, so two app processes can be judged without any store of their own:
// a counter that loses updates unless its read-modify-write is serialized, and append-only logs.
import { appendFile, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const dir = (): string => {
  const value = process.env.WITNESS_DIR;
  if (!value) throw new Error('WITNESS_DIR is not set');
  return value;
};

let writes = 0;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Monotonic nanoseconds, comparable across processes on one machine (CLOCK_MONOTONIC). */
export const now = (): string => process.hrtime.bigint().toString();

/**
 * Reads the counter `name`, waits `gapMs`, writes it back plus one: two overlapping calls lose
 * an update, so the final count equals the number of calls only if they never overlapped. The
 * file is replaced (temp file + rename), never rewritten in place, so that unexcluded writers
 * cannot interleave bytes into a number larger than the count.
 */
export async function bumpCounter(name: string, gapMs: number): Promise<number> {
  const file = join(dir(), `counter-${name}`);
  const before = Number(await readFile(file, 'utf8').catch(() => '0'));
  await sleep(gapMs);
  const temp = `${file}.${process.pid}.${++writes}.tmp`;
  await writeFile(temp, String(before + 1));
  await rename(temp, file);
  return before + 1;
}

/** Appends one line to the log `name` (O_APPEND: lines of concurrent writers never mix). */
export async function logLine(name: string, line: string): Promise<void> {
  await appendFile(join(dir(), `log-${name}`), `${line}\n`);
}
