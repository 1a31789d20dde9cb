import { MAX_TIMER_MS } from './timers';

/**
 * Something that can end a {@link sleepUntilWoken}: it is handed the wake-up and returns how to
 * stop listening. It may wake at once (during the call), for news that came before the sleep.
 */
export type WakeSource = (wake: () => void) => () => void;

/**
 * Resolves after `ms` (`Infinity`: never by time), when `signal` aborts, or when one of
 * `sources` wakes it, whichever comes first; never rejects. Whatever it armed (the timer, the
 * abort listener, every source's listener) is removed when it resolves, so a waiter woken early
 * leaves no timer behind to keep the process alive.
 */
export function sleepUntilWoken(
  ms: number,
  signal: AbortSignal | undefined,
  sources: readonly WakeSource[] = [],
): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const stops: Array<() => void> = [];
    const finish = (): void => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      for (const stop of stops) stop();
      resolve();
    };
    signal?.addEventListener('abort', finish, { once: true });
    for (const source of sources) {
      const stop = source(finish);
      if (done)
        stop(); // woke during registration: finish() ran before this stop was known
      else stops.push(stop);
    }
    if (!done && ms !== Infinity)
      timer = setTimeout(finish, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  });
}

/** A broadcast wake-up: every sleeper registered when it {@link Pulse.fire}s wakes. */
export class Pulse {
  private readonly sleepers = new Set<() => void>();

  /** The wake source of this pulse, for {@link sleepUntilWoken}. */
  readonly source: WakeSource = (wake) => {
    this.sleepers.add(wake);
    return () => this.sleepers.delete(wake);
  };

  /** Wakes everyone sleeping on this pulse now. */
  fire(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}
