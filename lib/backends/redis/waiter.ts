import type { RedisLockNames } from './redis-keys';

/** One queued acquisition's wake-up: set by a hand-over naming it, or by abort, outage, close. */
export class Waiter {
  /** Woken since `notified` was last reset. */
  notified = false;
  /** Fence of a lock a release handed to this waiter (set by the message telling it). */
  handedOver?: number;
  /** Slot of that hand-over (counted locks; 0 otherwise). */
  handedPermit = 0;
  /** Still in the key's queue (cleared once granted or gone). */
  queued = true;
  private wake?: () => void;

  constructor(
    readonly names: RedisLockNames,
    /** This waiter's queue member: "<hand-over lease ms> <tagged token> <channel>". */
    readonly member: string,
    /** The owner token (untagged). */
    readonly token: string,
  ) {}

  /** Wakes the waiter (at once if it sleeps, else its next {@link wait} returns at once). */
  notify(): void {
    this.notified = true;
    this.wake?.();
  }

  /** A release handed the lock to this waiter, with `fence` and slot `permit`. */
  grant(fence: number, permit: number): void {
    this.handedOver = fence;
    this.handedPermit = permit;
    this.notify();
  }

  /** Resolves on notify() (or at once if one came since `notified` was reset), or after `ms`. */
  wait(ms: number): Promise<void> {
    if (this.notified) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake?.(), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }
}
