import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { backoffDelay, withTimeout } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import {
  closeClient,
  runScript,
  runScriptBatch,
  type RedisLikeClient,
  type ScriptCall,
} from './redis-client';
import { endpointOf, RedisConnection } from './redis-connection';
import { FenceBucketCount } from './fence-bucket-count';
import {
  DEFAULT_FENCE_BUCKETS,
  FENCE_BUCKETS_META,
  fenceBucket,
  fenceCounterName,
} from './fence-buckets';
import {
  legacyFenceOwner,
  lockNameOf,
  queueScriptKeys,
  redisLockNames,
  type RedisLockNames,
  slotOfLockName,
} from './redis-keys';
import {
  ACQUIRE,
  CARRY_LEGACY,
  EXTEND,
  EXTEND_BATCH,
  EXTEND_MANY,
  FORCE_RELEASE,
  INSPECT,
  keyError,
  LEAVE_QUEUE,
  RELEASE,
  type RedisScript,
} from './redis-scripts';

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
/** Keys per SCAN step of the legacy fence sweep. */
const SWEEP_SCAN_COUNT = 1_000;

/** One queued acquisition's wake-up: set by a message naming it, or by abort/close. */
class Waiter {
  constructor(
    readonly names: RedisLockNames,
    /** This waiter's queue entry: "<channel> <hand-over lease ms> <token>". */
    readonly member: string,
  ) {}

  notified = false;
  /** Fence of a lock a release handed to this waiter (set by the message telling it). */
  handedOver?: number;
  /** Still in the key's queue (cleared once granted or gone). */
  queued = true;
  private wake?: () => void;

  notify(): void {
    this.notified = true;
    this.wake?.();
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

/**
 * `type: 'redis'`: one Redis node or a Redis Cluster. Acquire is `SET NX PX` plus `INCR` of the
 * key's fence bucket counter in one script, the fence kept in the lock value
 * (`<token> <fence>`); extend and release compare the owner token part. Fence counters are
 * shared by buckets (see `fence-buckets.ts`): `fenceBuckets` of them on one node, one per hash
 * slot on a Cluster, so the module's footprint stays bounded however many keys are locked. Waiters queue
 * FIFO in a sorted set and do not poll: a release hands the lock straight to the first in line
 * and tells it on its process's channel, so exactly one process wakes and it already holds the
 * lock (no herd, no extra round trip). A lease that runs out instead (holder crashed) is
 * retried when the holder's remaining PTTL says so. Every call goes through a
 * {@link RedisConnection}: while the client is known to be disconnected it fails at once with the
 * reason, and waiters are woken to fail with it.
 */
export class RedisLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'queue',
    // Shared and counted locks are not built on Redis yet (issue 19): refused by the engine.
    shared: false,
    permits: false,
  };

  /**
   * This backend's wake-up channel: a release names the next waiter's token here. One channel
   * per backend instance (not per key) costs one SUBSCRIBE for the life of the process and
   * spares every other process the wake-up.
   */
  private readonly channel = `distributed-lock:waiters:${randomBytes(12).toString('hex')}`;
  // The clients, their connection state and the redactor are ES-private: util.inspect of a lock
  // handle reaches this backend, and must not print a client's options (its password).
  #subscriber?: { client: RedisLikeClient; connection: RedisConnection };
  /** Pending or done SUBSCRIBE of `channel` (dropped on failure, so the next waiter retries). */
  private subscribed?: Promise<unknown>;
  /** This backend's queued waiters, by token. */
  private readonly waiters = new Map<string, Waiter>();
  /**
   * Waiters that gave up while the store was down, so their leave could not be sent: sent once
   * the client is ready again (with persistence, their places would otherwise hold up the next
   * hand-over for a hand-over lease).
   */
  private readonly unsentLeaves = new Map<string, Waiter>();
  private closed = false;
  private warnedNoSubscribe = false;

  readonly #client: RedisLikeClient;
  /** The client's connection state: every call goes through it. */
  readonly #connection: RedisConnection;
  /** Scrubs the configuration's secrets from what this backend logs and raises. */
  readonly #redactor: SecretRedactor;
  /** The node's fence bucket count; absent on a Cluster (one counter per hash slot). */
  readonly #buckets?: FenceBucketCount;

  constructor(
    client: RedisLikeClient,
    /** Whether the module created `client` (and so closes it). */
    private readonly ownsClient: boolean,
    private readonly backendName: string,
    redactor: SecretRedactor,
    /** Fence counters on a single node (`fenceBuckets`); not used on a Cluster. */
    fenceBuckets = DEFAULT_FENCE_BUCKETS,
  ) {
    this.#client = client;
    this.#redactor = redactor;
    if (client.isCluster !== true) {
      this.#buckets = new FenceBucketCount(fenceBuckets, (message) =>
        new Logger('LockService').warn(`redis backend "${backendName}": ${message}`),
      );
    }
    this.#connection = new RedisConnection(
      client,
      endpointOf(client, redactor),
      redactor,
      `redis backend "${backendName}"`,
      ownsClient ? 'always' : 'unhandled',
    );
    this.#connection.onReady(() => this.sendUnsentLeaves());
  }

  /**
   * Bootstrap with `startup: 'fail'`: resolves once the store answers a PING within
   * `timeoutMs`, rejects at once with the reason when the client cannot connect.
   */
  ready(timeoutMs: number): Promise<void> {
    return this.#connection.ready(() => this.#client.ping(), timeoutMs);
  }

  async tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    const reply = await this.attempt(redisLockNames(key), token, ttlMs, 0);
    return reply[0] === 1 ? { fence: Number(reply[1]) } : null;
  }

  /**
   * Waits in the key's FIFO queue. A waiter asks again when a release names it, when the
   * holder's lease would have run out, and at least every {@link WAITER_REFRESH_MS} (which
   * keeps its place: a crashed waiter loses it after {@link WAITER_TTL_MS}). One that gives up
   * leaves the queue at once.
   */
  async acquire({ key, token, ttlMs, waitMs, signal }: QueuedRequest): Promise<LockGrant | null> {
    if (signal.aborted || this.closed) return null;
    const names = redisLockNames(key);
    const deadline = monotonicNow() + waitMs;
    // Lease start of a handed-over lock: the send time of our last attempt that found the lock
    // not ours. The hand-over happened after that attempt ran, so the server's lease runs out
    // no sooner than this plus the hand-over lease (never earlier than we believe).
    let lastMissAt = monotonicNow();
    const handOverMs = Math.min(ttlMs, WAITER_TTL_MS);
    // Often enough that lastMissAt is never stale by more than a quarter of the lease.
    const refreshMs = Math.max(5, Math.min(WAITER_REFRESH_MS, handOverMs / 4));
    const waiter = new Waiter(names, `${this.channel} ${handOverMs} ${token}`);
    const handedOver = (fence: number): LockGrant => {
      waiter.queued = false;
      return { fence, grantedAt: lastMissAt, validityMs: handOverMs };
    };
    const onAbort = (): void => waiter.notify();
    signal.addEventListener('abort', onAbort, { once: true });
    // The store went away: wake up and fail with the reason now, not at the next refresh.
    const offDown = this.#connection.onDown(() => waiter.notify());
    this.waiters.set(token, waiter);
    try {
      // Subscribed before queueing: a hand-over message in between must not be missed.
      const listening = await this.subscribe(waitMs);
      for (let attempt = 0; ; attempt++) {
        waiter.notified = false;
        const sentAt = monotonicNow();
        const reply = await this.attempt(names, token, ttlMs, WAITER_TTL_MS, waiter.member);
        if (reply[0] === 1) {
          waiter.queued = false;
          return { fence: Number(reply[1]), grantedAt: sentAt };
        }
        if (reply[0] === 2) return handedOver(Number(reply[1]));
        lastMissAt = sentAt;
        if (waiter.handedOver !== undefined) return handedOver(waiter.handedOver);
        const remaining = deadline - monotonicNow();
        if (remaining <= 0 || signal.aborted || this.closed) return null;
        // Without the channel (SUBSCRIBE refused), nobody tells us of a hand-over: ask often.
        const nextAsk = listening ? refreshMs : Math.min(refreshMs, backoffDelay(attempt));
        await waiter.wait(Math.min(remaining, nextAsk, untilLeaseEnds(Number(reply[1]), nextAsk)));
        if (waiter.handedOver !== undefined) return handedOver(waiter.handedOver);
        // Aborted or closing: stop here, without one more attempt that could still take the lock.
        if (signal.aborted || this.closed) return null;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      offDown();
      this.waiters.delete(token);
      // Leave the queue before returning rather than hold up a free lock for WAITER_TTL_MS:
      // once the call settles its place is gone (a store that does not answer gets a short
      // bound; the leave then lands when it does). At close, the close does it.
      if (!this.closed) {
        await withTimeout(this.leaveQueue(token, waiter), LEAVE_BOUND_MS).catch(() => undefined);
      }
    }
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    return Number(await this.script(EXTEND, [redisLockNames(key).lock], [token, ttlMs])) === 1;
  }

  /**
   * Renews a batch of leases, each only if its own token holds it: one script call per
   * {@link EXTEND_BATCH} leases (on a Cluster, per slot: a script's keys share one), all calls
   * to one node in one pipeline, the nodes in parallel. A node that fails fails its leases
   * only (an `Error` each); rejects when every lease failed.
   */
  async extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    if (requests.length === 0) return [];
    const cluster = this.#buckets === undefined;
    const bySlot = new Map<number, number[]>();
    const locks = requests.map(({ key }) => lockNameOf(key));
    locks.forEach((lock, i) => {
      const slot = cluster ? slotOfLockName(lock) : 0;
      const indices = bySlot.get(slot);
      if (indices) indices.push(i);
      else bySlot.set(slot, [i]);
    });
    // Each pipeline goes to one node: by the slot table's node list (what ioredis checks).
    const byNode = new Map<string, Array<{ call: ScriptCall; indices: number[] }>>();
    for (const [slot, indices] of bySlot) {
      const node = cluster ? (this.#client.slots?.[slot]?.join(',') ?? `slot ${slot}`) : '';
      for (let at = 0; at < indices.length; at += EXTEND_BATCH) {
        const part = indices.slice(at, at + EXTEND_BATCH);
        const call: ScriptCall = {
          keys: part.map((i) => locks[i]),
          args: batchArgs(requests, part),
        };
        const calls = byNode.get(node);
        if (calls) calls.push({ call, indices: part });
        else byNode.set(node, [{ call, indices: part }]);
      }
    }
    const results = new Array<boolean | Error>(requests.length);
    await Promise.all(
      [...byNode.values()].map(async (calls) => {
        try {
          const replies = await this.#connection.run(() =>
            runScriptBatch(
              this.#client,
              EXTEND_MANY,
              calls.map((c) => c.call),
            ),
          );
          calls.forEach(({ indices }, j) => {
            const reply = replies[j];
            indices.forEach((i, k) => {
              if (reply instanceof Error) results[i] = reply;
              else {
                const answer = (reply as unknown[])[k];
                results[i] = keyError(answer) ?? Number(answer) === 1;
              }
            });
          });
        } catch (err) {
          const error = err instanceof Error ? err : new Error(String(err));
          for (const { indices } of calls) for (const i of indices) results[i] = error;
        }
      }),
    );
    if (results.every((r) => r instanceof Error)) throw results[0];
    return results;
  }

  async release(key: string, token: string): Promise<boolean> {
    const names = redisLockNames(key);
    return this.fenced(
      async (count) =>
        Number(await this.script(RELEASE, queueScriptKeys(names, count), [token, count ?? 0])) ===
        1,
    );
  }

  async isLocked(key: string): Promise<boolean> {
    return (await this.#connection.run(() => this.#client.exists(redisLockNames(key).lock))) === 1;
  }

  /** Held or not, the holder's fence (else the last one handed out), PTTL, live waiters. */
  async inspect(key: string): Promise<StoreLockInfo> {
    const names = redisLockNames(key);
    const reply = await this.fenced(
      async (count) =>
        (await this.script(INSPECT, queueScriptKeys(names, count), [count ?? 0])) as unknown[],
    );
    const [held, fence, pttl, waiting] = reply.map(Number);
    return {
      held: held === 1,
      fence,
      // PTTL -1: a key without expiry (not one of ours); report no expiry rather than -1.
      remainingMs: held === 1 && pttl >= 0 ? pttl : undefined,
      waiting,
      holders: held === 1 ? 1 : 0,
    };
  }

  /** Frees the key whoever holds it and hands it to the first in line, as a release would. */
  async forceRelease(key: string): Promise<boolean> {
    const names = redisLockNames(key);
    return this.fenced(
      async (count) =>
        Number(await this.script(FORCE_RELEASE, queueScriptKeys(names, count), [count ?? 0])) === 1,
    );
  }

  /**
   * One-off upgrade sweep: folds every per-key fence counter left by versions before fence
   * buckets (`{tag}key:fence`) into its key's bucket (raising the bucket to it) and deletes it,
   * as the key's next grant would; returns how many it folded. Keys that are locked again are
   * carried over by their grant anyway; this removes the counters of keys never locked again.
   * It SCANs the whole keyspace (every master of a Cluster), so run it once, off-peak, after
   * every instance runs this version (an older instance would create them again).
   */
  async sweepLegacyFences(): Promise<number> {
    const nodes = this.#client.isCluster ? (this.#client.nodes?.('master') ?? []) : [this.#client];
    let swept = 0;
    for (const node of nodes) {
      if (!node.scan) throw new Error('the client cannot SCAN');
      let cursor = '0';
      do {
        const [next, found] = await this.#connection.run(() =>
          node.scan!(cursor, 'MATCH', '{*}*:fence', 'COUNT', SWEEP_SCAN_COUNT),
        );
        cursor = next;
        for (const name of found) {
          const fullKey = legacyFenceOwner(name);
          if (fullKey === undefined) continue;
          const names = redisLockNames(fullKey);
          swept += await this.fenced(async (count) => {
            const meta = count === null ? [] : [FENCE_BUCKETS_META];
            const counter = fenceCounterName(fenceBucket(names.slot, count));
            return Number(
              await this.script(CARRY_LEGACY, [names.legacyFence, counter, ...meta], [count ?? 0]),
            );
          });
        }
      } while (cursor !== '0');
    }
    return swept;
  }

  async ping(): Promise<void> {
    await this.#connection.run(() => this.#client.ping());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const [, waiter] of waiters) waiter.notify();
    await withTimeout(
      Promise.allSettled(waiters.map(([token, waiter]) => this.leaveQueue(token, waiter))),
      LEAVE_AT_CLOSE_MS,
    ).catch(() => undefined);
    this.unsentLeaves.clear();
    const closing: Promise<void>[] = [];
    if (this.#subscriber) closing.push(closeClient(this.#subscriber.client));
    if (this.ownsClient) closing.push(closeClient(this.#client));
    await Promise.all(closing);
    this.#subscriber?.connection.detach();
    this.#connection.detach();
  }

  /** Takes a waiter out of its key's queue (once; again after an outage, if it failed then). */
  private async leaveQueue(token: string, waiter: Waiter): Promise<void> {
    if (!waiter.queued) return;
    waiter.queued = false;
    try {
      const { names, member } = waiter;
      await this.fenced((count) =>
        this.script(LEAVE_QUEUE, queueScriptKeys(names, count), [member, token, count ?? 0]),
      );
    } catch (err) {
      if (this.#connection.isDown() && !this.closed) this.unsentLeaves.set(token, waiter);
      throw err;
    }
  }

  private sendUnsentLeaves(): void {
    const leaves = [...this.unsentLeaves];
    this.unsentLeaves.clear();
    for (const [token, waiter] of leaves) {
      waiter.queued = true;
      this.leaveQueue(token, waiter).catch(() => undefined);
    }
  }

  /** Runs a script through the connection (at once failing while the client is down). */
  private script(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    onAbandoned?: (late: Promise<unknown>) => void,
  ): Promise<unknown> {
    return this.#connection.run(() => runScript(this.#client, script, keys, args), onAbandoned);
  }

  /**
   * One acquisition attempt; a positive waiter ttl queues (or keeps queued) the caller. An
   * attempt failed because the connection dropped may still run when ioredis resends it after
   * reconnecting: whatever it then took (the lock, a place in the queue) is given back.
   */
  private async attempt(
    names: RedisLockNames,
    token: string,
    ttlMs: number,
    waiterTtlMs: number,
    member = '',
  ): Promise<[number, number]> {
    return this.fenced(async (count) => {
      const keys = queueScriptKeys(names, count);
      const undo = (late: Promise<unknown>): void => {
        late
          .then(() => runScript(this.#client, LEAVE_QUEUE, keys, [member, token, count ?? 0]))
          .catch(() => undefined);
      };
      return (await this.script(
        ACQUIRE,
        keys,
        [token, ttlMs, waiterTtlMs, member, count ?? 0],
        undo,
      )) as [number, number];
    });
  }

  /**
   * Runs a call that reads or draws fences with the node's bucket count (`null` on a
   * Cluster): the first one moves the node to the configured `fenceBuckets`; one refused for
   * another count runs again with it (see {@link FenceBucketCount}).
   */
  private fenced<T>(call: (count: number | null) => Promise<T>): Promise<T> {
    if (!this.#buckets) return call(null);
    return this.#buckets.run((script, keys, args) => this.script(script, keys, args), call);
  }

  /**
   * Subscribes this backend's channel once. `false` when Redis refuses it (an ACL user without
   * channel permissions): waiters then poll instead of failing. A Redis that does not answer
   * at all fails the wait.
   */
  private async subscribe(maxMs: number): Promise<boolean> {
    // The store is known to be down: the subscriber's first connection would only find out later.
    if (this.#connection.isDown()) throw this.#connection.error();
    if (!this.subscribed) {
      const { client, connection } = this.subscriberClient();
      const subscribed = connection.run(() => client.subscribe(this.channel));
      subscribed.catch(() => {
        if (this.subscribed === subscribed) this.subscribed = undefined;
      });
      this.subscribed = subscribed;
    }
    const pending = this.subscribed;
    try {
      await withTimeout(pending, maxMs, {
        onTimeout: () => new Error(`SUBSCRIBE got no answer in ${Math.round(maxMs)} ms`),
      });
      return true;
    } catch (err) {
      if (!/NOPERM|permission/i.test(this.#redactor.message(err))) throw err;
      if (!this.warnedNoSubscribe) {
        this.warnedNoSubscribe = true;
        new Logger('LockService').warn(
          `redis backend "${this.backendName}": SUBSCRIBE refused (${this.#redactor.message(err)}); ` +
            'waiters poll instead of being told of a hand-over. Allow the user the channel ' +
            `pattern "distributed-lock:waiters:*" (ACL "&distributed-lock:waiters:*").`,
        );
      }
      return false;
    }
  }

  /** One shared subscriber connection per backend, made on first wait (never before). */
  private subscriberClient(): { client: RedisLikeClient; connection: RedisConnection } {
    if (!this.#subscriber) {
      const client = this.#client.duplicate();
      const connection = new RedisConnection(
        client,
        this.#connection.endpoint,
        this.#redactor,
        `redis backend "${this.backendName}" subscriber`,
        'always', // created here, whoever made the main client
      );
      this.#subscriber = { client, connection };
      // ioredis subscribes again by itself after a reconnect.
      client.on('message', (_channel, message) => {
        // "<token> <fence>": a release handed the lock to that waiter.
        const [token, fence] = message.split(' ');
        const waiter = this.waiters.get(token);
        if (!waiter) return; // gave up meanwhile: its leave passes the lock on
        waiter.handedOver = Number(fence);
        waiter.notify();
      });
    }
    return this.#subscriber;
  }
}

/**
 * How long a waiter sleeps before asking again when the lock is held for `leaseLeftMs` more
 * (the PTTL the attempt read): until just after that lease ends, since the first in line takes
 * it at once then. A lease in its last millisecond reads PTTL 0: look again at once, not after
 * `fallbackMs`. A PTTL below 0 (a key without expiry) gives no hint: `fallbackMs`.
 */
export function untilLeaseEnds(leaseLeftMs: number, fallbackMs: number): number {
  // PTTL rounds down and the key lives through its last millisecond: one more ms and it is gone.
  return leaseLeftMs >= 0 ? leaseLeftMs + 1 : fallbackMs;
}

/**
 * A renewal batch's ARGV: the tokens, then the ttl once when all share it (the usual case; a
 * hundred thousand ttls written out a tick were a visible share of its CPU), else one per key.
 */
function batchArgs(
  requests: readonly GrantRequest[],
  part: readonly number[],
): (string | number)[] {
  const args: (string | number)[] = part.map((i) => requests[i].token);
  const ttl = requests[part[0]].ttlMs;
  if (part.every((i) => requests[i].ttlMs === ttl)) args.push(ttl);
  else for (const i of part) args.push(requests[i].ttlMs);
  return args;
}
