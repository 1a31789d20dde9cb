/**
 * Small promise helpers for tests that watch concurrent work: a deferred, a bounded wait that
 * names what it waited for, a settled view of a rejection, and "still pending after N ms".
 */

/** A promise with its resolve and reject exposed. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rejects with a descriptive error if `promise` does not settle within `ms`; clears its timer. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise's outcome, value or error, to inspect after the fact. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Settles a promise into a value, so rejections can be inspected after the fact. */
export function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/** Whether `promise` is still pending after `ms`. */
export async function stillPendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol('pending');
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    promise.then(
      () => 'settled',
      () => 'settled',
    ),
    new Promise<symbol>((resolve) => {
      timer = setTimeout(() => resolve(marker), ms);
    }),
  ]);
  clearTimeout(timer);
  return result === marker;
}

/** Resolves when `signal` aborts (at once if it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

/** Polls `condition` every 10 ms until it holds; rejects naming `what` after `ms`. */
export async function eventually(
  condition: () => boolean,
  ms: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() >= deadline)
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}
