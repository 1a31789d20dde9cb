import type { WakeSource } from '../../core/shared/wake-up';

/** A waiter's interest in one key's release (see {@link ReleaseNotices.expect}). */
export interface ReleaseNotice {
  /** Wakes a sleeper when the release is heard, at once if it was heard already. */
  readonly source: WakeSource;
  /** Stops expecting it. */
  cancel(): void;
}

/** One notice's state. */
interface Expectation {
  heard: boolean;
  wake?: () => void;
}

/**
 * Which waiters of this process expect which key's release, by stored key: a release heard (made
 * by this process, or announced by another through the PostgreSQL listener) wakes the ones
 * waiting for that key. A notice registered before a try latches a release that comes before
 * the sleep, so none is missed in between.
 */
export class ReleaseNotices {
  private readonly expected = new Map<string, Set<Expectation>>();

  /** Registers interest in the release of `storedKey` (register before the try). */
  expect(storedKey: string): ReleaseNotice {
    const expectation: Expectation = { heard: false };
    let set = this.expected.get(storedKey);
    if (!set) {
      set = new Set();
      this.expected.set(storedKey, set);
    }
    set.add(expectation);
    return {
      source: (wake) => {
        if (expectation.heard) {
          wake();
          return () => undefined;
        }
        expectation.wake = wake;
        return () => {
          expectation.wake = undefined;
        };
      },
      cancel: () => {
        const current = this.expected.get(storedKey);
        current?.delete(expectation);
        if (current?.size === 0) this.expected.delete(storedKey);
      },
    };
  }

  /** `storedKey` was released: wakes its waiters. */
  fire(storedKey: string): void {
    const set = this.expected.get(storedKey);
    if (set) for (const expectation of set) hear(expectation);
  }

  /** Some release may have gone unheard (a listener was down): every waiter looks again. */
  fireAll(): void {
    for (const set of this.expected.values()) for (const expectation of set) hear(expectation);
  }
}

function hear(expectation: Expectation): void {
  expectation.heard = true;
  expectation.wake?.();
}
