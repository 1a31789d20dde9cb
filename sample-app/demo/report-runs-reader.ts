/**
 * Reads the app's REPORT_RUNS_FILE (one JSON line per report run, see
 * sample-app/app/report-runs.ts) from outside the app, as an operator with `tail -f` would:
 * the e2e test checks from it which replica ran which tick, after the processes have exited.
 * Only the line's type comes from the app (a type import, erased at runtime).
 */
import { readFile } from 'node:fs/promises';
import type { ReportRun } from '../app/report-runs';

/** One line of the runs file, as the app writes it. */
export type { ReportRun };

/** Every run recorded in `file`, in file order; none if the file does not exist. */
export async function readReportRuns(file: string): Promise<ReportRun[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as ReportRun);
}
