/**
 * A one-line progress bar on stdout, redrawn in place on a terminal. When stdout is not a
 * terminal (CI logs, pipes) it prints only the final state, so logs stay readable.
 */
export class ProgressBar {
  private lastDraw = 0;
  private readonly interactive = process.stdout.isTTY === true;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly width = 30,
  ) {}

  /** Shows `done` of `total`, with a short status after the bar (redrawn at most every 50 ms). */
  update(done: number, status = ''): void {
    if (!this.interactive) return;
    const now = performance.now();
    if (done < this.total && now - this.lastDraw < 50) return;
    this.lastDraw = now;
    process.stdout.write(`\r${this.line(done, status)}\x1b[K`);
  }

  /** Draws the final state and ends the line. */
  finish(done: number, status = ''): void {
    const line = this.line(done, status);
    process.stdout.write(this.interactive ? `\r${line}\x1b[K\n` : `${line}\n`);
  }

  private line(done: number, status: string): string {
    const filled = this.total === 0 ? this.width : Math.round((done / this.total) * this.width);
    const bar = '█'.repeat(filled) + '░'.repeat(this.width - filled);
    const count = `${done}/${this.total}`.padStart(String(this.total).length * 2 + 1);
    return `${this.label} ${bar} ${count}${status ? `  ${status}` : ''}`;
  }
}
