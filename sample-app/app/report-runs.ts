/**
 * The record of report runs (REPORT_RUNS_FILE): one JSON line per run, appended by whichever
 * app process ran it. A file rather than a table because it works the same with every
 * product store and needs no schema change, and because a reader (the e2e test, an operator
 * with `tail -f`) needs no database client and can read it after the processes have exited.
 * Each line is written by one `write` on a file opened with O_APPEND, so lines of processes
 * appending at the same time never interleave (on a local file system). The app only writes
 * it; the reader is on the demo side (sample-app/demo/report-runs-reader.ts).
 */
import { appendFile } from 'node:fs/promises';

/** One run of the report job. */
export interface ReportRun {
  /** The tick it ran for: its scheduled fire time, ISO 8601 (see `tickOf`). */
  tick: string;
  /** When the run started (ms since the epoch), on the leader. */
  startedAt: number;
  /** The app process that ran it. */
  pid: number;
  /** The leadership term it ran under (strictly rising from one leader to the next). */
  term: number | null;
  /** Products in the store. */
  products: number;
  /** Orders in the ledger. */
  orders: number;
}

/** Appends one run to `file`. */
export async function appendReportRun(file: string, run: ReportRun): Promise<void> {
  await appendFile(file, `${JSON.stringify(run)}\n`, 'utf8');
}
