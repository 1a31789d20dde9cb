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
 * re-hashed as it went from one entry to none and back, once per store call). `prev === this`
 * marks one taken off.
 */
interface Bounded {
  readonly deadline: number;
  readonly background: boolean;
  prev: Bounded | undefined;
  next: Bounded | undefined;
  fail(): void;
}

/** Newest pending operation first; every entry is pending (removed when it settles). */
let head: Bounded | undefined;
/** Pending operations that keep the process alive (not background). */
let foreground = 0;
/**
 * One timer for every pending operation, armed for the earliest deadline among them (not a
 * periodic check: a process whose calls wait long, a queued acquisition for instance, would
 * otherwise wake up every few ms for nothing).
 */
let sweeper: NodeJS.Timeout | undefined;
/** When the armed sweeper fires (`Infinity`: none armed). */
let wakeAt = Infinity;
/** Whether the armed sweeper keeps the process alive. */
let sweeperRefed = false;

function sweep(): void {
  sweeper = undefined;
  wakeAt = Infinity;
  const now = performance.now();
  let next = Infinity;
  for (let op = head; op;) {
    const following = op.next;
    if (op.deadline <= now) op.fail();
    else if (op.deadline < next) next = op.deadline;
    op = following;
  }
  if (next < Infinity) armSweeper(next);
}

function armSweeper(at: number): void {
  if (sweeper) clearTimeout(sweeper);
  wakeAt = at;
  // Whole ms, rounded up (a timer never fires before its time; one that still finds its
  // operation not due re-arms for the rest).
  sweeper = setTimeout(sweep, Math.max(1, Math.ceil(at - performance.now())));
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
  if (op.deadline < wakeAt) armSweeper(op.deadline);
}

/**
 * Takes a settled operation off the list (once). The sweeper stays armed (it finds nothing due
 * and re-arms for what is left, or stops); it stops keeping the process alive with the last
 * foreground operation.
 */
function untrack(op: Bounded): boolean {
  if (op.prev === op) return false; // already taken off
  if (op.prev) op.prev.next = op.next;
  else head = op.next;
  if (op.next) op.next.prev = op.prev;
  op.prev = op;
  op.next = undefined;
  if (!op.background && --foreground === 0 && sweeperRefed) {
    sweeperRefed = false;
    sweeper?.unref();
  }
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
 * Settles like `promise`, or rejects with `onTimeout()` after `ms`. The underlying operation is
 * not cancelled (stores offer no way to); callers clean up after a late result themselves. One
 * shared timer, armed for the earliest deadline, serves every pending operation: a timer per
 * store call (two per lock cycle) cost about 6 µs each.
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
