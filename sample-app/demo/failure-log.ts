import type { JsonReply } from './load-client';

const KEPT_FAILURES = 5;

/** Counts unexpected answers and keeps the first few, for diagnosis. */
export class FailureLog {
  /** Unexpected answers so far. */
  count = 0;
  /** The first few of them, as `target: status body`. */
  readonly samples: string[] = [];

  /** Records one unexpected answer. */
  add(target: string, reply: JsonReply): void {
    this.count++;
    if (this.samples.length < KEPT_FAILURES) {
      this.samples.push(`${target}: ${reply.status} ${JSON.stringify(reply.body)}`);
    }
  }
}
