/**
 * What both chaos workers (a `@Locked` holder, chaos-worker.ts, and a leader,
 * leadership-worker.ts) do with what they hold, so the history checker judges them alike: a
 * {@link HoldWatch} records the hold from its grant to the last observation that it was held,
 * and {@link watchedSection} is one critical section under it.
 */
import type { HistoryRecorder } from '../support/history';
import { readWitness, writeWitness } from '../support/witness-file';
import type { ChaosWorkerStats } from './chaos-worker';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const hr = () => process.hrtime.bigint();

/**
 * One hold in the history: `acq` when made, `lost` (at the last time it was seen held) when its
 * signal aborts or a look finds it no longer held, `rel` when its holder ends it.
 */
export class HoldWatch {
  private lastHeld = hr();
  private ended = false;

  constructor(
    private readonly recorder: HistoryRecorder,
    private readonly key: string,
    private readonly token: string,
    fence: number | null,
    signal: AbortSignal,
    /** Whether it is held now (`isHeld()`, `isLeader()`), and how that look is named. */
    private readonly held: { (): boolean; readonly what: string },
  ) {
    recorder.acq(key, token, fence);
    signal.addEventListener('abort', () => this.lost(String(signal.reason)));
  }

  /** One look: moves the hold's end forward, or ends it. */
  observe(): boolean {
    if (this.ended) return false;
    if (this.held()) {
      this.lastHeld = hr();
      return true;
    }
    this.lost(`${this.held.what} turned false`);
    return false;
  }

  /** Its holder ends it (a release, or a stop while it lasts); nothing if it ended already. */
  release(): void {
    if (this.ended) return;
    this.ended = true;
    this.recorder.rel(this.key, this.token);
  }

  private lost(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.recorder.lost(this.key, this.token, reason, this.lastHeld);
  }
}

/** What one critical section needs besides its hold. */
export interface SectionContext {
  readonly recorder: HistoryRecorder;
  readonly witnessFile: string;
  readonly stats: ChaosWorkerStats;
  /** A fenced write under the hold's fence (counted in `stats`). */
  fencedWrite(): Promise<void>;
}

/**
 * One critical section under `watch`: a fenced write, a read of the unfenced witness, `workMs`
 * of work while it keeps looking, a second fenced write made without looking (a holder that
 * lost what it held unnoticed writes late: the fence must stop it), and, only after a look
 * that finds it still held, the witness write. `false` when the hold ended on the way.
 */
export async function watchedSection(
  watch: HoldWatch,
  key: string,
  token: string,
  workMs: number,
  ctx: SectionContext,
  /** Called once the section holds and has read the witness, before its work. */
  announce?: () => void,
): Promise<boolean> {
  ctx.stats.sections++;
  if (!watch.observe()) return false;
  await ctx.fencedWrite();
  const read = readWitness(ctx.witnessFile);
  announce?.();
  const until = performance.now() + workMs;
  while (performance.now() < until && watch.observe()) {
    await sleep(Math.min(10, Math.max(0, until - performance.now())));
  }
  // Written without looking.
  await ctx.fencedWrite();
  // The witness is not fenced: it is written only after a synchronous look.
  if (!watch.observe()) return false;
  writeWitness(ctx.witnessFile, read + 1);
  ctx.recorder.witness(key, token, read, read + 1);
  ctx.stats.witnessWrites++;
  return true;
}
