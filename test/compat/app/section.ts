/**
 * One critical section as the app reports it: which process ran it, under which fence, and when
 * it started and ended (monotonic nanoseconds as decimal strings, comparable across processes on
 * one machine). Shared with the test driver, so this file imports nothing.
 */
export interface Section {
  pid: number;
  fence: number | null;
  start: string;
  end: string;
  count: number;
}
