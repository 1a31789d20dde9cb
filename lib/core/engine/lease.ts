import { type LockError, LockLostError } from '../../errors/lock.errors';
import type { GrantRequest, LockBackend, LockMode } from '../contract/lock-backend';
import { monotonicNow } from '../shared/clock';
import { messageOf } from '../shared/error-message';
import { withTimeout } from '../shared/timers';
import { LeaseEnding } from './lease-ending';
import type { RenewalScheduler, ScheduledLease } from './renewal-scheduler';

/** Shortest lease left behind by lockAtLeastFor. */
const MIN_KEEP_MS = 100;
/** `renewAt`/`renewFrom` when no renewal is scheduled (a whole number: see `renewAt`). */
const NOT_SCHEDULED = -1;
/** Outcomes of `finish` without data, shared (one object less per release). */
const RELEASED = { outcome: 'released' } as const;
const KEPT = { outcome: 'kept' } as const;
const LOST = { outcome: 'lost' } as const;
/** `withTimeout` options of a lease's store calls, shared. */
const FOREGROUND = { background: false } as const;
const BACKGROUND = { background: true } as const;

/** What a lease needs from the manager that owns it. */
export interface LeaseHost {
  /** The lease stopped being held (released or lost): forget it. */
  leaseEnded(lease: Lease): void;
  /** Report a loss (event, log, metric). */
  reportLost(lease: Lease, reason: string, cause?: unknown): void;
  /** Report a successful renewal. */
  reportRenewed(lease: Lease): void;
  /** Report a backend failure that did not (yet) lose the lock. */
  reportError(lease: Lease, reason: string, error: unknown): void;
  /** A store call's failure as the redacted `LockError` the caller gets. */
  storeError(lease: Lease, what: string, error: unknown): LockError;
}

/** Fixed facts of one grant. */
export interface LeaseGrantInfo {
  readonly backendName: string;
  readonly backend: LockBackend;
  /** Key as the user gave it. */
  readonly key: string;
  /** Key with the module prefix, as the backend sees it. */
  readonly fullKey: string;
  readonly token: string;
  readonly fence: number | null;
  /** Mode granted (the request's). */
  readonly mode: LockMode;
  /** Holders the key admits (1: a mutex), as requested; renewals send it again. */
  readonly permits: number;
  /** Slot granted, `0..permits-1`. */
  readonly permit: number;
  readonly ttl: number;
  /** Monotonic time the lease starts counting from (request sent, or grant time). */
  readonly startedAt: number;
  /** Lease validity from `startedAt`. */
  readonly validityMs: number;
  readonly autoRenew: boolean;
  /** Hard cap on holding from `startedAt`, ms; `undefined`: none. */
  readonly maxHold?: number;
  readonly lockAtLeastFor: number;
  /** Bound on each store call made for this lease. */
  readonly operationTimeout: number;
}

/**
 * One real grant of one key on one backend, shared by every re-entry of it. Owns the
 * watchdog's decisions (renew every third of the validity, normally ttl/3) and the monotonic
 * deadline: a refused renewal, or a deadline that passes before a renewal succeeds, marks the
 * lease lost at once. The backend's {@link RenewalScheduler} keeps the time for all its leases
 * and sends the renewals that are due together.
 */
export class Lease extends LeaseEnding implements ScheduledLease {
  /** `held` until released or lost; never goes back. */
  state: 'held' | 'released' | 'lost' = 'held';
  /** Handles (the first acquisition plus re-entries) not yet released. */
  holders = 1;
  /** `withLock`/`@Locked` scopes running under this lease: work shutdown can wait for. */
  scopes = 0;
  /**
   * Links of the held leases' list (`HeldLeases`, which alone writes them): `heldPrev === this`
   * once the lease is off it.
   */
  heldPrev?: Lease;
  heldNext?: Lease;
  /** Links of its scheduler's list (see `ScheduledLease`). */
  watchPrev?: ScheduledLease;
  watchNext?: ScheduledLease;
  /**
   * How long a lease of `ttl` can be trusted from the moment its request was sent: what the
   * backend says (Redlock less its clock-drift allowance, ZooKeeper capped below the session
   * timeout), never more than the ttl.
   */
  static validityOf(backend: LockBackend, ttl: number): number {
    const validity = backend.leaseValidity?.(ttl) ?? ttl;
    return Math.min(validity, ttl);
  }

  /** Current lease ttl (changed by `extend(ttl)`). */
  ttl: number;
  /** Monotonic time at which the lease runs out unless renewed first. */
  deadline: number;
  /**
   * Monotonic time at which the lease is given up whatever happens (maxHold); `undefined`
   * without maxHold (no boxed number per lease for the common case).
   */
  private readonly giveUpAt?: number;

  /**
   * Monotonic time the next renewal is due, in whole ms (rounded up, by under a millisecond
   * of a renewal period; whole numbers are stored unboxed, a fraction costs a heap number per
   * lease);
   * {@link NOT_SCHEDULED} when none is scheduled.
   */
  private renewAt = NOT_SCHEDULED;
  /**
   * Earliest monotonic time (whole ms) the scheduler may renew early, to send it with other
   * leases' due renewals (halfway through the renewal period: two renewals may still fail
   * before the lease runs out, and leases settle into one cohort renewed together).
   */
  private renewFrom = NOT_SCHEDULED;
  private renewing = false;
  /**
   * The store call renewing or extending this lease that has not settled yet. It may outlive
   * its bound (`operationTimeout`: the caller was answered with a timeout while the request
   * still waits behind a stalled server); no other renewal is sent until it settles, so one
   * lease never has two renewals in flight.
   */
  private inFlight?: Promise<unknown>;

  constructor(
    private readonly host: LeaseHost,
    readonly info: LeaseGrantInfo,
    /** Keeps the time for this lease and renews it (with the backend's other due leases). */
    private readonly scheduler: RenewalScheduler,
  ) {
    super();
    this.ttl = info.ttl;
    this.deadline = info.startedAt + info.validityMs;
    if (info.maxHold !== undefined) this.giveUpAt = info.startedAt + info.maxHold;
  }

  /** Monotonic time the lock was granted. */
  get acquiredAt(): number {
    return this.info.startedAt;
  }

  /** What `util.inspect` shows (never the backend, its client or their options). */
  [Symbol.for('nodejs.util.inspect.custom')](
    _depth: number,
    options: object,
    inspect: (value: unknown, options: object) => string,
  ): string {
    const { key, backendName, fence, ttl, mode, permit } = this.info;
    const facts = {
      key,
      backend: backendName,
      fence,
      mode,
      permit,
      ttl,
      state: this.state,
      holders: this.holders,
    };
    return `Lease ${inspect(facts, options)}`;
  }

  /** Held and within its deadline. A passed deadline is turned into a loss on the spot. */
  isHeld(): boolean {
    if (this.state !== 'held') return false;
    const now = monotonicNow();
    if (this.giveUpAt !== undefined && now >= this.giveUpAt) {
      this.giveUp();
      return false;
    }
    if (now >= this.deadline) {
      this.markLost('lease expired before it was renewed');
      return false;
    }
    return true;
  }

  /**
   * Starts the deadline timer and, with autoRenew, the watchdog. `shortLease`: the store's
   * lease is shorter than the ttl (a hand-over), so it is renewed to the ttl after a third of
   * that short validity, with or without autoRenew (most hand-overs are released before).
   */
  start(shortLease = false): void {
    if (shortLease) this.scheduleRenewal(this.info.validityMs / 3);
    else if (this.info.autoRenew) this.scheduleRenewal(renewalPeriod(this.info.backend, this.ttl));
    else this.watch();
  }

  /**
   * Renews now to `ttl`; `LockLostError` if the backend says it is no longer ours. A renewal
   * still in flight is waited for first (within the same bound).
   */
  async extend(ttl: number): Promise<void> {
    if (!this.isHeld()) throw this.lostError('no longer held');
    let sentAt = monotonicNow();
    let ok: boolean;
    try {
      if (this.inFlight) {
        await this.bounded(this.inFlight.then(ignore, ignore));
        if (!this.isHeld()) throw this.lostError('lost while a renewal was in flight');
        sentAt = monotonicNow();
      }
      const call = this.info.backend.extend(this.info.fullKey, this.info.token, ttl);
      this.sending(call);
      ok = await this.bounded(call);
    } catch (err) {
      if (err instanceof LockLostError) throw err;
      const error = this.host.storeError(this, 'extend failed', err);
      this.host.reportError(this, 'extend failed', error);
      throw error;
    }
    if (this.state !== 'held') throw this.lostError('lost while extending');
    if (!ok) {
      this.markLost('extend refused: the lock is no longer ours');
      throw this.lostError('extend refused: the lock is no longer ours');
    }
    if (sentAt >= this.deadline) {
      // The reply came back for a request sent after the lease had already run out locally.
      this.markLost('lease expired before it was extended');
      throw this.lostError('lease expired before it was extended');
    }
    this.ttl = ttl;
    this.deadline = sentAt + Lease.validityOf(this.info.backend, ttl);
    if (this.info.autoRenew) this.scheduleRenewal(renewalPeriod(this.info.backend, ttl));
    else this.watch(); // the deadline moved
    this.host.reportRenewed(this);
  }

  /** Marks the lease lost (idempotent): aborts the signal and reports it. */
  markLost(reason: string, cause?: unknown): void {
    if (this.state !== 'held') return;
    this.state = 'lost';
    this.stopWatching();
    this.end(reason, cause);
    this.host.leaseEnded(this);
    this.host.reportLost(this, reason, cause);
    // Best effort: if the store still has our token (e.g. renewal timed out locally), free
    // it now instead of blocking others until it expires. Compare-token, so never theirs.
    this.info.backend.release(this.info.fullKey, this.info.token, this.info).catch(() => undefined);
  }

  /**
   * Ends the lease for good after its last holder released it. Returns what happened so the
   * manager can report it: `released`, `kept` (lockAtLeastFor on a lease store: left to
   * expire), `deferred` (lockAtLeastFor on a session store: the manager releases it after
   * `keepForMs`), or `lost` (found not ours). `keep: false` gives it back at once whatever
   * `lockAtLeastFor` says (an acquisition that failed: nobody ran under it).
   */
  async finish(
    reason: string,
    keep = true,
  ): Promise<
    { outcome: 'released' | 'kept' | 'lost' } | { outcome: 'deferred'; keepForMs: number }
  > {
    if (this.state === 'lost') return LOST;
    if (!this.isHeld()) return LOST;
    this.state = 'released';
    this.stopWatching();
    this.end(reason);
    this.host.leaseEnded(this);
    const { backend, fullKey, token } = this.info;
    const keepFor = keep ? this.acquiredAt + this.info.lockAtLeastFor - monotonicNow() : 0;
    if (keepFor >= 1) {
      if (!backend.capabilities.leaseBased) return { outcome: 'deferred', keepForMs: keepFor };
      // Leave the lock to expire by itself at acquiredAt + lockAtLeastFor: after any renewal
      // in flight, which would otherwise lengthen it again. At least a short floor: a lease of
      // a few ms is refused by stores that subtract clock drift (Redlock), and keeping the lock
      // a little longer than asked is harmless.
      if (this.inFlight) await this.bounded(this.inFlight.then(ignore, ignore)).catch(ignore);
      const keepMs = this.acquiredAt + this.info.lockAtLeastFor - monotonicNow();
      const ok = await this.bounded(
        backend.extend(fullKey, token, Math.max(Math.ceil(keepMs), MIN_KEEP_MS)),
      );
      return ok ? KEPT : LOST;
    }
    const ok = await this.bounded(backend.release(fullKey, token, this.info));
    return ok ? RELEASED : LOST;
  }

  /** @inheritdoc */
  sending(call: Promise<unknown>): void {
    this.inFlight = call;
    const settled = (): void => {
      if (this.inFlight !== call) return;
      this.inFlight = undefined;
      // A renewal that came due meanwhile goes out now.
      if (this.state === 'held' && this.renewAt !== NOT_SCHEDULED) this.watch();
    };
    call.then(settled, settled);
  }

  /** A store call that cannot hang the caller: it fails after `operationTimeout`. */
  private bounded<T>(call: Promise<T>, background = false): Promise<T> {
    return withTimeout(call, this.info.operationTimeout, background ? BACKGROUND : FOREGROUND);
  }

  /**
   * maxHold reached: renewal stops and the lock is given up like a lost one (signal aborted,
   * `lost` reported, released in the store if still ours), whatever its holder is doing.
   */
  private giveUp(): void {
    this.markLost(`held for its maxHold of ${this.info.maxHold} ms: given up`);
  }

  /** Renew `delayMs` from now (whole ms), or with another lease's batch from halfway there. */
  private scheduleRenewal(delayMs: number): void {
    const now = monotonicNow();
    this.renewAt = Math.ceil(now + delayMs);
    this.renewFrom = Math.ceil(now + delayMs / 2);
    this.watch();
  }

  /** Tells the scheduler when this lease next needs looking at. */
  private watch(): void {
    this.scheduler.watch(this, this.nextAt());
  }

  private stopWatching(): void {
    this.renewAt = NOT_SCHEDULED;
    this.renewFrom = NOT_SCHEDULED;
    this.scheduler.forget(this);
  }

  /** The next renewal, deadline or maxHold, whichever comes first. */
  private nextAt(): number {
    return Math.min(
      this.renewing || this.inFlight || this.renewAt === NOT_SCHEDULED ? Infinity : this.renewAt,
      this.deadline,
      this.giveUpAt ?? Infinity,
    );
  }

  /** @inheritdoc */
  check(now: number, due: ScheduledLease[]): number {
    if (this.state !== 'held') return Infinity;
    if (this.giveUpAt !== undefined && now >= this.giveUpAt) {
      this.giveUp();
      return Infinity;
    }
    if (now >= this.deadline) {
      this.markLost(
        this.info.autoRenew
          ? 'lease expired before it could be renewed (store unreachable or process stalled)'
          : 'lease expired (autoRenew is off)',
      );
      return Infinity;
    }
    if (
      this.renewAt !== NOT_SCHEDULED &&
      !this.renewing &&
      this.inFlight === undefined &&
      now >= this.renewFrom
    ) {
      this.renewAt = NOT_SCHEDULED;
      this.renewFrom = NOT_SCHEDULED;
      this.renewing = true;
      due.push(this);
    }
    return this.nextAt();
  }

  /** @inheritdoc */
  renewalRequest(): GrantRequest {
    const { fullKey, token, mode, permits } = this.info;
    return { key: fullKey, token, ttlMs: this.ttl, mode, permits };
  }

  /** @inheritdoc */
  renewed(sentAt: number, ttl: number, result: unknown): void {
    this.renewing = false;
    if (this.state !== 'held') return;
    if (result === false) return this.markLost('renewal refused: the lock is no longer ours');
    if (result !== true) {
      // No answer (store unreachable, timed out): retry sooner than ttl/3; the deadline declares
      // the loss if no renewal succeeds in time. The host redacts the reason and the error.
      this.host.reportError(this, `renewal failed: ${messageOf(result)}`, result);
      this.scheduleRenewal(Math.max(10, (this.deadline - monotonicNow()) / 3));
      return;
    }
    if (sentAt >= this.deadline) return this.markLost('lease expired before it was renewed');
    // The ttl this request carried, not this.ttl: an extend(ttl) may have changed it meanwhile.
    this.deadline = sentAt + Lease.validityOf(this.info.backend, ttl);
    if (this.info.autoRenew) this.scheduleRenewal(renewalPeriod(this.info.backend, this.ttl));
    else this.watch();
    this.host.reportRenewed(this);
  }
}

/** Swallows a settled call's outcome (only its settling is waited for). */
function ignore(): void {}

/** Renewal period: a third of the validity, so two renewals may fail before the lease runs out. */
function renewalPeriod(backend: LockBackend, ttl: number): number {
  return Lease.validityOf(backend, ttl) / 3;
}
