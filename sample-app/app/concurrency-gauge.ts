/**
 * When a call ran: `process.hrtime.bigint()` nanoseconds, as decimal strings since JSON has no
 * bigint. The clock is CLOCK_MONOTONIC, which is system-wide on Linux, so spans recorded by
 * different app processes on one machine compare: a client can merge them and tell how many
 * calls overlapped across all replicas, which no single process can see.
 */
export interface Span {
  start: string;
  end: string;
}

/** A call's result, when it ran, and how many calls (itself included) were running as it began. */
export interface Measured<T> {
  value: T;
  span: Span;
  concurrent: number;
}

/**
 * Counts the calls of one kind in progress in this process, and the most there ever were:
 * how the app shows that shared readers overlap and that a counted lock keeps provider calls
 * within their limit.
 */
export class ConcurrencyGauge {
  private running = 0;
  private highest = 0;
  private total = 0;

  /** Calls in progress right now. */
  get inProgress(): number {
    return this.running;
  }

  /** Most calls ever in progress at once. */
  get max(): number {
    return this.highest;
  }

  /** Calls started so far. */
  get calls(): number {
    return this.total;
  }

  /** Runs `call` counted as in progress, recording its span (also when it throws). */
  async measure<T>(call: () => Promise<T>): Promise<Measured<T>> {
    this.running++;
    this.total++;
    this.highest = Math.max(this.highest, this.running);
    const concurrent = this.running;
    const start = process.hrtime.bigint();
    try {
      const value = await call();
      return {
        value,
        span: { start: String(start), end: String(process.hrtime.bigint()) },
        concurrent,
      };
    } finally {
      this.running--;
    }
  }
}
