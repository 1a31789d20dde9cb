import type { GrantRequest, LockBackend } from '../contract/lock-backend';
import { monotonicNow } from '../shared/clock';
import { unrefTimer, withTimeout } from '../shared/timers';

/** Leases per `extendMany` call (a Redis script call, a SQL statement's worth). */
const RENEW_CHUNK = 1_000;
/** Chunk calls in flight at once per backend (one per Cluster node or Redlock node each). */
const CHUNKS_IN_FLIGHT = 2;

/** What the scheduler needs of a lease (implemented by `Lease`). */
export interface ScheduledLease {
  /**
   * Checks the lease at `now`: ends it if its deadline or maxHold passed, pushes it onto `due` if
   * its renewal is due (or nearly: see `Lease.renewFrom`), and returns when it next needs looking
   * at (`Infinity`: never again, it ended or waits for nothing).
   */
  check(now: number, due: ScheduledLease[]): number;
  /** The store request renewing this lease to its current ttl. */
  renewalRequest(): GrantRequest;
  /** The answer to a renewal sent at `sentAt` for `ttl`: true, false, or why it failed. */
  renewed(sentAt: number, ttl: number, result: unknown): void;
  /**
   * Links of the scheduler's list of watched leases (the scheduler alone writes them):
   * `watchPrev === this` once the lease is off it, `undefined` before it was ever on it.
   */
  watchPrev?: ScheduledLease;
  watchNext?: ScheduledLease;
  /**
   * The store call renewing this lease, sent: no other renewal of it goes out until it settled,
   * even when its answer came too late for its bound.
   */
  sending(call: Promise<unknown>): void;
}

/**
 * Watches every lease held on one backend with ONE timer, and renews the leases that are due
 * together: one `extendMany` per tick instead of one round trip and one timer per lease (10,000
 * held locks were 29,000 store calls/s and a quarter of a core; a timer per acquisition was a
 * measurable share of an uncontended cycle).
 *
 * A lease is renewed when its renewal time comes, or earlier when another lease's tick comes
 * within the second half of its renewal period (renewing early is harmless, and it gathers the
 * leases into one cohort: after the first tick they share one renewal time). Deadlines and
 * maxHold are checked on the same timer, which is armed for the earliest of them.
 */
export class RenewalScheduler {
  /**
   * The watched leases, most recent first, in a list linked through the leases themselves:
   * watching and forgetting one (every acquisition and release) allocates and hashes nothing.
   */
  private newest?: ScheduledLease;
  private count = 0;
  private timer?: NodeJS.Timeout;
  /** When the armed timer fires (`Infinity`: none armed). */
  private wakeAt = Infinity;
  private closed = false;

  constructor(
    private readonly backend: LockBackend,
    /** Bound on one batch's store call. */
    private readonly operationTimeout: number,
  ) {}

  /**
   * Watches `lease` from now on; called again whenever its renewal time or deadline moved
   * earlier. Cheap when nothing moved earlier than the armed timer (the common case: a new lease
   * is due a third of a ttl from now, after the leases already held).
   */
  watch(lease: ScheduledLease, nextAt: number): void {
    if (this.closed) return;
    if (!this.watching(lease)) {
      lease.watchPrev = undefined;
      lease.watchNext = this.newest;
      if (this.newest) this.newest.watchPrev = lease;
      this.newest = lease;
      this.count++;
    }
    if (nextAt < this.wakeAt) this.arm(nextAt);
  }

  /**
   * Stops watching `lease` (released or lost). The timer is left armed even when nothing is
   * watched any more: disarming and re-arming it for each short-lived lock cost more than one
   * idle wake-up per renewal period.
   */
  forget(lease: ScheduledLease): void {
    if (!this.watching(lease)) return;
    if (lease.watchPrev) lease.watchPrev.watchNext = lease.watchNext;
    else this.newest = lease.watchNext;
    if (lease.watchNext) lease.watchNext.watchPrev = lease.watchPrev;
    lease.watchPrev = lease;
    lease.watchNext = undefined;
    this.count--;
  }

  /** How many leases are watched (diagnostics and tests). */
  get size(): number {
    return this.count;
  }

  /** Whether `lease` is on this scheduler's list. */
  private watching(lease: ScheduledLease): boolean {
    return lease.watchPrev !== lease && (lease.watchPrev !== undefined || this.newest === lease);
  }

  /** Stops the timer for good (the engine is closing; the leases were released or lost). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.wakeAt = Infinity;
    for (let lease = this.newest; lease;) {
      const next = lease.watchNext;
      lease.watchPrev = lease;
      lease.watchNext = undefined;
      lease = next;
    }
    this.newest = undefined;
    this.count = 0;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.wakeAt = at;
    // Whole milliseconds, rounded up: firing up to 1 ms late only delays the report of a loss
    // (a lease checks its deadline itself whenever it is used).
    this.timer = unrefTimer(() => this.tick(), Math.max(0, Math.ceil(at - monotonicNow())));
  }

  private tick(): void {
    this.timer = undefined;
    this.wakeAt = Infinity;
    const now = monotonicNow();
    const due: ScheduledLease[] = [];
    let next = Infinity;
    for (let lease = this.newest; lease;) {
      // Read before the check: a lease that ends is taken off the list (its links cleared).
      const following = lease.watchNext;
      const at = lease.check(now, due);
      if (at === Infinity) this.forget(lease);
      else if (at < next) next = at;
      // A loss reported by the check can end other leases at once (a listener releasing its
      // locks): if the next one went, start over (a lease checked twice is not renewed twice).
      lease = following && following.watchPrev === following ? this.newest : following;
    }
    if (due.length > 0) void this.renew(due);
    // A lease watched meanwhile (during check: none; renew runs later) re-arms by itself.
    if (next < this.wakeAt && !this.closed) this.arm(next);
  }

  /**
   * Renews `due`: in store calls of {@link RENEW_CHUNK} leases, {@link CHUNKS_IN_FLIGHT} at a
   * time (or one call per lease where the backend cannot batch). Chunks, not one call for all:
   * a hundred thousand requests built and in flight at once all outlived the young generation,
   * and copying them made the garbage collector most of a tick's CPU.
   */
  private async renew(due: readonly ScheduledLease[]): Promise<void> {
    const { backend } = this;
    if (!backend.extendMany) {
      const sentAt = monotonicNow();
      await Promise.all(
        due.map(async (lease) => {
          const { key, token, ttlMs } = lease.renewalRequest();
          let result: unknown;
          try {
            const call = backend.extend(key, token, ttlMs);
            lease.sending(call);
            result = await this.bounded(call);
          } catch (err) {
            result = err;
          }
          lease.renewed(sentAt, ttlMs, result);
        }),
      );
      return;
    }
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < due.length) {
        const chunk = due.slice(next, (next += RENEW_CHUNK));
        await this.renewChunk(backend.extendMany!.bind(backend), chunk);
      }
    };
    const workers = Math.min(CHUNKS_IN_FLIGHT, Math.ceil(due.length / RENEW_CHUNK));
    await Promise.all(Array.from({ length: workers }, worker));
  }

  /** One `extendMany` call for `chunk`; each lease gets its own answer. */
  private async renewChunk(
    extendMany: NonNullable<LockBackend['extendMany']>,
    chunk: readonly ScheduledLease[],
  ): Promise<void> {
    const requests = chunk.map((lease) => lease.renewalRequest());
    // Per chunk: a lease's new deadline counts from when its own request went out.
    const sentAt = monotonicNow();
    let results: readonly unknown[];
    try {
      const call = extendMany(requests);
      for (const lease of chunk) lease.sending(call);
      results = await this.bounded(call);
      if (results.length !== requests.length) {
        throw new Error(
          `extendMany answered ${results.length} results for ${requests.length} requests`,
        );
      }
    } catch (err) {
      results = requests.map(() => err);
    }
    chunk.forEach((lease, i) => lease.renewed(sentAt, requests[i].ttlMs, results[i]));
  }

  /** A store call that cannot hang the renewals: it fails after `operationTimeout`. */
  private bounded<T>(call: Promise<T>): Promise<T> {
    return withTimeout(call, this.operationTimeout, { background: true });
  }
}

/** One {@link RenewalScheduler} per backend, made on first use. */
export class RenewalSchedulers {
  private readonly byBackend = new Map<LockBackend, RenewalScheduler>();

  constructor(private readonly operationTimeout: number) {}

  /** The scheduler of `backend`'s leases. */
  for(backend: LockBackend): RenewalScheduler {
    let scheduler = this.byBackend.get(backend);
    if (!scheduler) {
      scheduler = new RenewalScheduler(backend, this.operationTimeout);
      this.byBackend.set(backend, scheduler);
    }
    return scheduler;
  }

  /** Stops every scheduler's timer (the engine is closed). */
  close(): void {
    for (const scheduler of this.byBackend.values()) scheduler.close();
    this.byBackend.clear();
  }
}
