/** Largest delay `setTimeout` honours; longer values fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * `setTimeout` that never keeps the process alive: a held lock or a pending renewal is not a
 * reason for a process to stay up once the application itself is done.
 */
export function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const timer = setTimeout(fn, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  timer.unref();
  return timer;
}

/**
 * Resolves after `ms` or as soon as `signal` aborts (never rejects), so waiting loops can
 * re-check their own state after either.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.min(Math.max(0, ms), MAX_TIMER_MS),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Exponential backoff with "equal jitter" (half fixed, half random): contenders spread out
 * instead of retrying in lock-step, yet never retry sooner than half the step.
 */
export function backoffDelay(attempt: number, baseMs = 5, capMs = 250): number {
  const step = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 16));
  return step / 2 + Math.random() * (step / 2);
}

/**
 * A pending bounded operation (see withTimeout), linked into the pending list by its own
 * fields: adding and removing one allocates nothing and never resizes a table (a Set here was
 * re-hashed as it went from one entry to none and back, once per store call).
 */
interface Bounded {
  readonly deadline: number;
  readonly background: boolean;
  prev: Bounded | undefined;
  next: Bounded | undefined;
  fail(): void;
}

/** How often pending operations are checked: a timed-out one fails at most this late. */
const SWEEP_MS = 10;
/** Newest pending operation first; every entry is pending (removed when it settles). */
let head: Bounded | undefined;
/** Pending operations that keep the process alive (not background). */
let foreground = 0;
let sweeper: NodeJS.Timeout | undefined;
/** Whether the armed sweeper keeps the process alive. */
let sweeperRefed = false;

function sweep(): void {
  sweeper = undefined;
  const now = performance.now();
  for (let op = head; op;) {
    const next = op.next;
    if (op.deadline <= now) op.fail();
    op = next;
  }
  if (head) armSweeper();
}

function armSweeper(): void {
  sweeper = setTimeout(sweep, SWEEP_MS);
  sweeperRefed = foreground > 0;
  if (!sweeperRefed) sweeper.unref();
}

function track(op: Bounded): void {
  op.next = head;
  if (head) head.prev = op;
  head = op;
  if (!op.background && foreground++ === 0 && sweeper && !sweeperRefed) {
    sweeperRefed = true;
    sweeper.ref();
  }
  if (!sweeper) armSweeper();
}

/**
 * Takes a settled operation off the list (once). The sweeper is not unref'd here when the
 * last foreground operation settles: it is re-armed unref'd at its next sweep (10 ms), so a
 * caller making one store call after another does not toggle its ref on every call.
 */
function untrack(op: Bounded): boolean {
  if (op.prev === op) return false; // already taken off
  if (op.prev) op.prev.next = op.next;
  else head = op.next;
  if (op.next) op.next.prev = op.prev;
  op.prev = op;
  op.next = undefined;
  if (!op.background) foreground--;
  return true;
}

/** The error of a store call that did not answer in time. */
export function noAnswerError(ms: number): Error {
  return new Error(`no answer within ${Math.round(ms)} ms`);
}

/** Options of {@link withTimeout}. */
export interface TimeoutOptions {
  /** The rejection after the timeout (default: "no answer within N ms"). */
  readonly onTimeout?: () => Error;
  /** `true` for background work (renewals) that must not keep the process alive. */
  readonly background?: boolean;
}

/**
 * Settles like `promise`, or rejects with `onTimeout()` after `ms` (checked every 10 ms, so up
 * to that much later). The underlying operation is not cancelled (stores offer no way to);
 * callers clean up after a late result themselves. One shared sweeper timer serves every
 * pending operation: a timer per store call (two per lock cycle) cost about 6 µs each.
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  options?: TimeoutOptions,
): Promise<T> {
  if (!Number.isFinite(ms)) return promise;
  return new Promise<T>((resolve, reject) => {
    const op: Bounded = {
      deadline: performance.now() + Math.min(Math.max(0, ms), MAX_TIMER_MS),
      background: options?.background === true,
      prev: undefined,
      next: undefined,
      fail: () => {
        if (untrack(op)) reject(options?.onTimeout ? options.onTimeout() : noAnswerError(ms));
      },
    };
    track(op);
    promise.then(
      (value) => {
        untrack(op);
        resolve(value);
      },
      (err: unknown) => {
        untrack(op);
        reject(err);
      },
    );
  });
}
