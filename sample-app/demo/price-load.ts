/**
 * Price reads against a running re-pricer: readers (under the shared lock, and the same read
 * without it as the contrast) keep reading one SKU's price on every app instance while
 * re-prices rewrite it in two steps under the exclusive lock, and what each saw is tallied.
 */
import { FailureLog } from './failure-log';
import { keepInFlight, tryCallJson, type JsonReply } from './load-client';
import { maxOverlap, overlapping, spanOf, type SpanText } from './spans';

/** Options of `runPriceLoad`. */
export interface PriceLoadOptions {
  /** App base URLs; reads and re-prices are spread across them. */
  targets: readonly string[];
  /** A SKU whose price is set. */
  sku: string;
  /** Re-prices to run, one after the other; the readers read until they are done. */
  reprices: number;
  /** Locked readers in flight per target. */
  readersPerTarget: number;
  /** Unlocked readers in flight per target (0: no contrast). */
  unlockedReadersPerTarget: number;
  /** Called after every completed re-price, with how many are done. */
  onProgress?: (reprices: number) => void;
}

/** What one kind of read saw. */
export interface ReadTally {
  reads: number;
  /** Reads answered with anything but a price. */
  failed: number;
  /** Reads that saw net and gross disagree, or the price change under them. */
  torn: number;
  /** Most reads running at once, across every instance. */
  maxConcurrent: number;
  /** Reads that ran while a re-price was writing (under the lock: must be 0). */
  duringReprice: number;
}

/** What a price load run saw. */
export interface PriceLoadResult {
  locked: ReadTally;
  unlocked: ReadTally;
  /** Re-prices that completed. */
  reprices: number;
  /** Most re-prices running at once, across every instance (exclusive: 1). */
  maxConcurrentReprices: number;
  /** Answers that were neither a price nor a completed re-price (5xx, 409, network), in all. */
  failed: number;
  failures: string[];
  elapsedMs: number;
}

/** Runs the readers and the re-pricer together; resolves once every re-price is done. */
export async function runPriceLoad(options: PriceLoadOptions): Promise<PriceLoadResult> {
  const started = performance.now();
  const failures = new FailureLog();
  const repriceSpans: SpanText[] = [];
  const lockedReads: ReadOutcome[] = [];
  const unlockedReads: ReadOutcome[] = [];
  const failedReads = { locked: 0, unlocked: 0 };
  let repricing = true;

  const readers = (
    kind: 'locked' | 'unlocked',
    perTarget: number,
    into: ReadOutcome[],
  ): Promise<void> =>
    keepInFlight(
      options.targets,
      perTarget,
      () => repricing,
      async (target) => {
        const path = kind === 'locked' ? '' : '/unlocked';
        const reply = await tryCallJson('GET', `${target}/prices/${options.sku}${path}`);
        const outcome = readOutcome(reply);
        if (outcome !== null) into.push(outcome);
        else {
          failedReads[kind]++;
          failures.add(target, reply);
        }
      },
    );

  const repricer = async (): Promise<void> => {
    try {
      for (let i = 0; i < options.reprices; i++) {
        const target = options.targets[i % options.targets.length];
        const reply = await tryCallJson('POST', `${target}/prices/${options.sku}/reprice`, {
          netCents: 1_000 + 7 * (i + 1),
        });
        const span = spanOf(reply.body);
        if (reply.status === 200 && span !== null) repriceSpans.push(span);
        else failures.add(target, reply);
        options.onProgress?.(i + 1);
      }
    } finally {
      repricing = false;
    }
  };

  await Promise.all([
    readers('locked', options.readersPerTarget, lockedReads),
    readers('unlocked', options.unlockedReadersPerTarget, unlockedReads),
    repricer(),
  ]);
  return {
    locked: tally(lockedReads, failedReads.locked, repriceSpans),
    unlocked: tally(unlockedReads, failedReads.unlocked, repriceSpans),
    reprices: repriceSpans.length,
    maxConcurrentReprices: maxOverlap(repriceSpans),
    failed: failures.count,
    failures: failures.samples,
    elapsedMs: performance.now() - started,
  };
}

/** One read's verdict and span. */
interface ReadOutcome {
  consistent: boolean;
  span: SpanText;
}

function readOutcome(reply: JsonReply): ReadOutcome | null {
  const span = spanOf(reply.body);
  if (reply.status !== 200 || span === null || typeof reply.body.consistent !== 'boolean') {
    return null;
  }
  return { consistent: reply.body.consistent, span };
}

function tally(
  reads: readonly ReadOutcome[],
  failed: number,
  repriceSpans: readonly SpanText[],
): ReadTally {
  const spans = reads.map((read) => read.span);
  return {
    reads: reads.length,
    failed,
    torn: reads.filter((read) => !read.consistent).length,
    maxConcurrent: maxOverlap(spans),
    duringReprice: overlapping(spans, repriceSpans),
  };
}
