import type { LockGrant, QueuedRequest } from '../../core/contract/lock-backend';
import { monotonicNow } from '../../core/shared/clock';
import { backoffDelay, withTimeout } from '../../core/shared/timers';
import { attempt, isMutex, leanAttempt, taggedToken, type AttemptReply } from './attempt';
import type { RedisLockNames } from './redis-keys';
import type { RedisStore } from './redis-store';
import { LEAVE } from './scripts/leave';
import { WakeChannel } from './wake-channel';
import { Waiter } from './waiter';

/** A queued waiter asks again at least this often (a quarter of a shorter ttl), which also keeps its place. */
const WAITER_REFRESH_MS = 1_000;
/**
 * A waiter's place lapses this long after its last refresh. It is also the longest lease a
 * release hands over (the new holder renews it to its ttl after a third of it): so a waiter
 * that crashed while queued delays the others by at most about this much.
 */
const WAITER_TTL_MS = 3 * WAITER_REFRESH_MS;
/** Longest a waiter that gives up waits for its leave from the queue to be answered. */
const LEAVE_BOUND_MS = 250;
/** Longest a close() spends taking its waiters out of their queues. */
const LEAVE_AT_CLOSE_MS = 1_000;

/**
 * Waiting in a key's FIFO queue (`waiting: 'queue-first'`). Waiters do not poll: a release hands
 * the lock straight to the first in line and tells it on its process's channel, so exactly one
 * process wakes and it already holds the lock (no herd, no extra round trip). A lease that runs
 * out instead (holder crashed) is retried when the holder's remaining PTTL says so. A waiter
 * asks again when a release names it, when the holder's lease would have run out, and at least
 * every {@link WAITER_REFRESH_MS} (which keeps its place: a crashed waiter loses it after
 * {@link WAITER_TTL_MS}). One that gives up leaves the queue at once; one that gave up while the
 * store was down leaves once the client is ready again.
 */
export class RedisWaiting {
  private readonly channel: WakeChannel;
  /** The queued waiters, by tagged token (what hand-over messages name). */
  private readonly waiters = new Map<string, Waiter>();
  /**
   * Waiters that gave up while the store was down, so their leave could not be sent: sent once
   * the client is ready again (with persistence, their places would otherwise hold up the next
   * hand-over for a hand-over lease).
   */
  private readonly unsentLeaves = new Map<string, Waiter>();
  private closed = false;

  constructor(private readonly store: RedisStore) {
    this.channel = new WakeChannel(store, (message) => this.handedOver(message));
    store.connection.onReady(() => this.sendUnsentLeaves());
  }

  /** The channel a release names to tell this process's waiters in its reply. */
  get channelName(): string {
    return this.channel.name;
  }

  /**
   * Takes a free key, else waits in its queue. A mutex tries the lean script first: a free key
   * nobody waits for costs one round trip and no channel. Otherwise, once the channel listens,
   * the first attempt already queues the caller when the key is busy; until then a plain attempt
   * comes first: nothing may be queued before the channel listens (a hand-over message in
   * between would be missed), and a free key needs no channel at all.
   */
  acquire(request: QueuedRequest, names: RedisLockNames): Promise<LockGrant | null> {
    if (request.signal.aborted || this.closed) return Promise.resolve(null);
    const sentAt = monotonicNow();
    const deadline = sentAt + request.waitMs;
    if (!isMutex(request)) {
      return this.channel.listening
        ? this.waitInQueue(request, names, deadline)
        : this.tryThenWait(request, names, deadline);
    }
    // A mutex tries the lean way first (one hop: the whole uncontended cycle); a miss means the
    // key is held or awaited, so the wait follows at once.
    return leanAttempt(this.store, names, request).then((fence) => {
      if (fence !== null) return { fence: Number(fence), grantedAt: sentAt, permit: 0 };
      if (request.signal.aborted || this.closed || monotonicNow() >= deadline) {
        request.onQueued?.();
        return null;
      }
      return this.waitInQueue(request, names, deadline);
    });
  }

  /**
   * Before the channel listens: a plain attempt, then the wait. Nothing may be queued before the
   * channel listens (a hand-over message in between would be missed).
   */
  private async tryThenWait(
    request: QueuedRequest,
    names: RedisLockNames,
    deadline: number,
  ): Promise<LockGrant | null> {
    const sentAt = monotonicNow();
    const reply = await attempt(this.store, names, request, 0);
    if (reply[0] === 1) return grantOf(reply, sentAt);
    request.onQueued?.();
    if (request.signal.aborted || this.closed || monotonicNow() >= deadline) return null;
    return this.waitInQueue(request, names, deadline);
  }

  /**
   * A hand-over to one of this process's waiters, "<tagged token> <fence> <slot>": from the
   * channel, or from the reply of a release made here.
   */
  handedOver(message: string): void {
    const [token, fence, slot] = message.split(' ');
    // Absent: it gave up meanwhile, and its leave passes the lock on.
    this.waiters.get(token)?.grant(Number(fence), Number(slot ?? 0));
  }

  /** Wakes every waiter (they return `null`), takes them out of their queues, ends the channel. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const waiters = [...this.waiters.values()];
    this.waiters.clear();
    for (const waiter of waiters) waiter.notify();
    await withTimeout(
      Promise.allSettled(waiters.map((waiter) => this.leaveQueue(waiter))),
      LEAVE_AT_CLOSE_MS,
    ).catch(() => undefined);
    this.unsentLeaves.clear();
    await this.channel.close();
  }

  /** The wait in the queue, its first attempt queueing the caller if the key is busy. */
  private async waitInQueue(
    request: QueuedRequest,
    names: RedisLockNames,
    deadline: number,
  ): Promise<LockGrant | null> {
    const { ttlMs, signal } = request;
    // Lease start of a handed-over lock: the send time of our last attempt that found the lock
    // not ours. The hand-over happened after that attempt ran, so the server's lease runs out
    // no sooner than this plus the hand-over lease (never earlier than we believe).
    let lastMissAt = monotonicNow();
    const handOverMs = Math.min(ttlMs, WAITER_TTL_MS);
    // Often enough that lastMissAt is never stale by more than a quarter of the lease.
    const refreshMs = Math.max(5, Math.min(WAITER_REFRESH_MS, handOverMs / 4));
    // Messages name the tagged token (what a shared or counted waiter asks rides with it).
    const tagged = taggedToken(request);
    const waiter = new Waiter(names, `${handOverMs} ${tagged} ${this.channel.name}`, request.token);
    const handedOver = (): LockGrant => {
      waiter.queued = false;
      const fence = waiter.handedOver!;
      return { fence, grantedAt: lastMissAt, validityMs: handOverMs, permit: waiter.handedPermit };
    };
    const onAbort = (): void => waiter.notify();
    signal.addEventListener('abort', onAbort, { once: true });
    // The store went away: wake up and fail with the reason now, not at the next refresh.
    const offDown = this.store.connection.onDown(() => waiter.notify());
    this.waiters.set(tagged, waiter);
    try {
      const listening =
        this.channel.listening || (await this.channel.subscribe(deadline - monotonicNow()));
      for (let round = 0; ; round++) {
        waiter.notified = false;
        const sentAt = monotonicNow();
        const reply: AttemptReply = await attempt(
          this.store,
          names,
          request,
          WAITER_TTL_MS,
          waiter.member,
        );
        if (reply[0] === 1) {
          waiter.queued = false;
          return grantOf(reply, sentAt);
        }
        if (reply[0] === 2) {
          waiter.handedOver = Number(reply[1]);
          waiter.handedPermit = Number(reply[2] ?? 0);
          return handedOver();
        }
        if (round === 0) request.onQueued?.();
        lastMissAt = sentAt;
        if (waiter.handedOver !== undefined) return handedOver();
        const remaining = deadline - monotonicNow();
        if (remaining <= 0 || signal.aborted || this.closed) return null;
        // Without the channel (SUBSCRIBE refused), nobody tells us of a hand-over: ask often.
        const nextAsk = listening ? refreshMs : Math.min(refreshMs, backoffDelay(round));
        await waiter.wait(Math.min(remaining, nextAsk, untilLeaseEnds(Number(reply[1]), nextAsk)));
        if (waiter.handedOver !== undefined) return handedOver();
        // Aborted or closing: stop here, without one more attempt that could still take the lock.
        if (signal.aborted || this.closed) return null;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      offDown();
      this.waiters.delete(tagged);
      // Leave the queue before returning rather than hold up a free lock for WAITER_TTL_MS:
      // once the call settles its place is gone (a store that does not answer gets a short
      // bound; the leave then lands when it does). At close, the close does it.
      if (!this.closed && waiter.queued) {
        await withTimeout(this.leaveQueue(waiter), LEAVE_BOUND_MS).catch(() => undefined);
      }
    }
  }

  /** Takes a waiter out of its key's queue (once; again after an outage, if it failed then). */
  private async leaveQueue(waiter: Waiter): Promise<void> {
    if (!waiter.queued) return;
    waiter.queued = false;
    try {
      await this.store.keyScript(LEAVE, waiter.names, [waiter.member, waiter.token]);
    } catch (err) {
      if (this.store.connection.isDown() && !this.closed) {
        this.unsentLeaves.set(waiter.token, waiter);
      }
      throw err;
    }
  }

  private sendUnsentLeaves(): void {
    const leaves = [...this.unsentLeaves.values()];
    this.unsentLeaves.clear();
    for (const waiter of leaves) {
      waiter.queued = true;
      this.leaveQueue(waiter).catch(() => undefined);
    }
  }
}

/** A grant from an attempt's `{1, fence, slot}` reply, taken at `sentAt`. */
function grantOf(reply: AttemptReply, sentAt: number): LockGrant {
  return { fence: Number(reply[1]), grantedAt: sentAt, permit: Number(reply[2] ?? 0) };
}

/**
 * How long a waiter sleeps before asking again when the lock is held for `leaseLeftMs` more
 * (the PTTL the attempt read): until just after that lease ends, since the first in line takes
 * it at once then. A lease in its last millisecond reads PTTL 0: look again at once, not after
 * `fallbackMs`. A PTTL below 0 (no hint) gives `fallbackMs`.
 */
export function untilLeaseEnds(leaseLeftMs: number, fallbackMs: number): number {
  // PTTL rounds down and the key lives through its last millisecond: one more ms and it is gone.
  return leaseLeftMs >= 0 ? leaseLeftMs + 1 : fallbackMs;
}
