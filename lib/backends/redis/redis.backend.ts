import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
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
import {
  SHARED_ACQUIRE,
  SHARED_EXTEND_MANY,
  SHARED_INSPECT,
  SHARED_LEAVE,
  SHARED_RELEASE,
} from './redis-sharing-scripts';
import { inspectInfo, isMutex, isWrongType, modeLetter, taggedToken } from './redis-sharing';

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
/** Most tokens {@link RedisLockBackend}'s shared-grant hint keeps (then it starts over). */
const SHARED_TOKENS_MAX = 10_000;
/** Keys per SCAN step of the legacy fence sweep. */
const SWEEP_SCAN_COUNT = 1_000;

/** Runs a script with its KEYS and ARGV (through the connection, or straight on the client). */
type ScriptRunner = (
  script: RedisScript,
  keys: readonly string[],
  args: readonly (string | number)[],
) => Promise<unknown>;

/** A script's answer to an acquisition attempt: `[code, fence or ms, slot?]` (see the scripts). */
type AttemptReply = [number, number, number?];

/** One queued acquisition's wake-up: set by a message naming it, or by abort/close. */
class Waiter {
  constructor(
    readonly names: RedisLockNames,
    /** This waiter's queue entry: "<channel> <hand-over lease ms> <tagged token>". */
    readonly member: string,
    /** The owner token (untagged). */
    readonly token: string,
    /** A plain mutex request (the mutex scripts first), else shared or counted. */
    readonly mutex: boolean,
  ) {}

  notified = false;
  /** Fence of a lock a release handed to this waiter (set by the message telling it). */
  handedOver?: number;
  /** Slot of that hand-over (counted locks; 0 otherwise). */
  handedPermit = 0;
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
 * `type: 'redis'`: one Redis node or a Redis Cluster. A mutex's acquire is `SET NX PX` plus `INCR` of the
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
 *
 * Shared and counted locks keep their holders in a hash at the lock's name, one field per holder
 * with its mode, slot, expiry and fence, and queue in the same FIFO (see
 * `redis-sharing-scripts.ts`). The mutex keeps its string and its scripts as they were: a mutex
 * call that meets a hash fails with WRONGTYPE and is run again with the sharing script.
 */
export class RedisLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
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
  /**
   * The channel's SUBSCRIBE was answered: waiters queue from their first attempt (ioredis
   * subscribes again by itself after a reconnect, so it stays true).
   */
  private listening = false;
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
  /**
   * Tokens of shared and counted grants made here, so their release and extend go straight to
   * the sharing scripts (`release` and `extend` are not told the mode; without the hint the
   * mutex script answers WRONGTYPE first, a round trip more). A hint only: bounded (a lease
   * left to expire is never released), and a token missing from it takes the longer way.
   */
  private readonly sharedTokens = new Set<string>();

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

  async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    const reply = await this.attempt(redisLockNames(request.key), request, 0);
    if (reply[0] !== 1) return null;
    return reply[2] === undefined
      ? { fence: Number(reply[1]) }
      : { fence: Number(reply[1]), permit: Number(reply[2]) };
  }

  /**
   * Takes a free key, else waits in the key's FIFO queue (`waiting: 'queue-first'`). Once this
   * backend listens on its channel, the first attempt already queues the caller when the key is
   * busy: a contended acquisition costs one round trip before its wait, not a try and then a
   * queueing attempt. Until then a plain attempt comes first, so a process whose keys are
   * always free never opens the subscriber connection. A waiter asks again when a release names
   * it, when the holder's lease would have run out, and at least every
   * {@link WAITER_REFRESH_MS} (which keeps its place: a crashed waiter loses it after
   * {@link WAITER_TTL_MS}). One that gives up leaves the queue at once.
   */
  acquire(request: QueuedRequest): Promise<LockGrant | null> {
    if (request.signal.aborted || this.closed) return Promise.resolve(null);
    const deadline = monotonicNow() + request.waitMs;
    const names = redisLockNames(request.key);
    return this.listening
      ? this.waitInQueue(request, names, deadline)
      : this.tryThenWait(request, names, deadline);
  }

  /**
   * {@link acquire} before the channel listens: a plain attempt, then the wait. Nothing may be
   * queued before the channel listens (a hand-over message in between would be missed), and a
   * free key needs no channel at all.
   */
  private async tryThenWait(
    request: QueuedRequest,
    names: RedisLockNames,
    deadline: number,
  ): Promise<LockGrant | null> {
    const sentAt = monotonicNow();
    const reply = await this.attempt(names, request, 0);
    if (reply[0] === 1) return grantOf(reply, sentAt);
    request.onQueued?.();
    if (request.signal.aborted || this.closed || monotonicNow() >= deadline) return null;
    return this.waitInQueue(request, names, deadline);
  }

  /** {@link acquire}'s wait in the queue, its first attempt queueing the caller if busy. */
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
    const waiter = new Waiter(
      names,
      `${this.channel} ${handOverMs} ${tagged}`,
      request.token,
      isMutex(request),
    );
    const handedOver = (fence: number, permit: number): LockGrant => {
      waiter.queued = false;
      if (!waiter.mutex) this.noteShared(waiter.token);
      return { fence, grantedAt: lastMissAt, validityMs: handOverMs, permit };
    };
    const onAbort = (): void => waiter.notify();
    signal.addEventListener('abort', onAbort, { once: true });
    // The store went away: wake up and fail with the reason now, not at the next refresh.
    const offDown = this.#connection.onDown(() => waiter.notify());
    this.waiters.set(tagged, waiter);
    try {
      // Subscribed before queueing: a hand-over message in between must not be missed.
      const listening = this.listening || (await this.subscribe(deadline - monotonicNow()));
      for (let attempt = 0; ; attempt++) {
        waiter.notified = false;
        const sentAt = monotonicNow();
        const reply = await this.attempt(names, request, WAITER_TTL_MS, waiter.member);
        if (reply[0] === 1) {
          waiter.queued = false;
          return grantOf(reply, sentAt);
        }
        if (reply[0] === 2) return handedOver(Number(reply[1]), Number(reply[2] ?? 0));
        if (attempt === 0) request.onQueued?.();
        lastMissAt = sentAt;
        if (waiter.handedOver !== undefined) {
          return handedOver(waiter.handedOver, waiter.handedPermit);
        }
        const remaining = deadline - monotonicNow();
        if (remaining <= 0 || signal.aborted || this.closed) return null;
        // Without the channel (SUBSCRIBE refused), nobody tells us of a hand-over: ask often.
        const nextAsk = listening ? refreshMs : Math.min(refreshMs, backoffDelay(attempt));
        await waiter.wait(Math.min(remaining, nextAsk, untilLeaseEnds(Number(reply[1]), nextAsk)));
        if (waiter.handedOver !== undefined) {
          return handedOver(waiter.handedOver, waiter.handedPermit);
        }
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

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const lock = redisLockNames(key).lock;
    if (!this.sharedTokens.has(token)) {
      try {
        return Number(await this.script(EXTEND, [lock], [token, ttlMs])) === 1;
      } catch (err) {
        if (!isWrongType(err)) throw err;
      }
    }
    // The key is a hash: a shared or counted holder's lease (or nothing of ours).
    const [renewed] = (await this.script(SHARED_EXTEND_MANY, [lock], [token, ttlMs])) as unknown[];
    const error = keyError(renewed);
    if (error) throw error;
    return Number(renewed) === 1;
  }

  /**
   * Renews a batch of leases, each only if its own token holds it: one script call per
   * {@link EXTEND_BATCH} leases (on a Cluster, per slot: a script's keys share one), all calls
   * to one node in one pipeline, the nodes in parallel. A node that fails fails its leases
   * only (an `Error` each); rejects when every lease failed. Mutex leases go to the mutex script,
   * shared and counted ones to theirs (the hash layout).
   */
  async extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    if (requests.length === 0) return [];
    const locks = requests.map(({ key }) => lockNameOf(key));
    const results = new Array<boolean | Error>(requests.length);
    const mutexes: number[] = [];
    const others: number[] = [];
    for (let i = 0; i < requests.length; i++) (isMutex(requests[i]) ? mutexes : others).push(i);
    await Promise.all([
      this.renewBatch(EXTEND_MANY, requests, locks, mutexes, results),
      this.renewBatch(SHARED_EXTEND_MANY, requests, locks, others, results),
    ]);
    // A mutex lease whose key is a hash now (WRONGTYPE: it was lost, and shared or counted
    // holders took the key): the sharing script gives the answer, "not ours".
    const moved = mutexes.filter((i) => isWrongType(results[i]));
    if (moved.length > 0) {
      await this.renewBatch(SHARED_EXTEND_MANY, requests, locks, moved, results);
    }
    if (results.every((r) => r instanceof Error)) throw results[0];
    return results;
  }

  /** {@link extendMany}'s leases `indices` with `script`: their results into `results`. */
  private async renewBatch(
    script: RedisScript,
    requests: readonly GrantRequest[],
    locks: readonly string[],
    indices: readonly number[],
    results: (boolean | Error)[],
  ): Promise<void> {
    if (indices.length === 0) return;
    const cluster = this.#buckets === undefined;
    const bySlot = new Map<number, number[]>();
    for (const i of indices) {
      const slot = cluster ? slotOfLockName(locks[i]) : 0;
      const inSlot = bySlot.get(slot);
      if (inSlot) inSlot.push(i);
      else bySlot.set(slot, [i]);
    }
    // Each pipeline goes to one node: by the slot table's node list (what ioredis checks).
    const byNode = new Map<string, Array<{ call: ScriptCall; indices: number[] }>>();
    for (const [slot, inSlot] of bySlot) {
      const node = cluster ? (this.#client.slots?.[slot]?.join(',') ?? `slot ${slot}`) : '';
      for (let at = 0; at < inSlot.length; at += EXTEND_BATCH) {
        const part = inSlot.slice(at, at + EXTEND_BATCH);
        const call: ScriptCall = {
          keys: part.map((i) => locks[i]),
          args: batchArgs(requests, part),
        };
        const calls = byNode.get(node);
        if (calls) calls.push({ call, indices: part });
        else byNode.set(node, [{ call, indices: part }]);
      }
    }
    await Promise.all(
      [...byNode.values()].map(async (calls) => {
        try {
          const replies = await this.#connection.run(() =>
            runScriptBatch(
              this.#client,
              script,
              calls.map((c) => c.call),
            ),
          );
          calls.forEach(({ indices: part }, j) => {
            const reply = replies[j];
            part.forEach((i, k) => {
              if (reply instanceof Error) results[i] = reply;
              else {
                const answer = (reply as unknown[])[k];
                results[i] = keyError(answer) ?? Number(answer) === 1;
              }
            });
          });
        } catch (err) {
          const error = err instanceof Error ? err : new Error(String(err));
          for (const { indices: part } of calls) for (const i of part) results[i] = error;
        }
      }),
    );
  }

  async release(key: string, token: string): Promise<boolean> {
    const names = redisLockNames(key);
    const shared = this.sharedTokens.delete(token);
    return this.fenced(async (count) => {
      const keys = queueScriptKeys(names, count);
      // The channel rides along so the sharing script hands this process's own waiters their
      // slot in its reply (the mutex's script reads token and count only).
      const args = [token, this.channel, count ?? 0];
      const released = shared
        ? await this.script(SHARED_RELEASE, keys, args)
        : await this.mutexOr(this.run, RELEASE, SHARED_RELEASE, keys, args);
      if (!Array.isArray(released)) return Number(released) === 1;
      // {dropped, hand-over...}: this process's waiters are told here, and the release resolves
      // only once their grants went through (a turn of the event loop): whatever the releasing
      // caller does next (its next acquire's write) must not hold up the next holder.
      if (released.length > 1) {
        for (let i = 1; i < released.length; i++) this.handedOver(String(released[i]));
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      return Number(released[0]) === 1;
    });
  }

  async isLocked(key: string): Promise<boolean> {
    return (await this.#connection.run(() => this.#client.exists(redisLockNames(key).lock))) === 1;
  }

  /**
   * Held or not, the holder's fence (else the last one handed out), lease left, live waiters;
   * for shared and counted holders also how many, their mode, permits and slots.
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const names = redisLockNames(key);
    const reply = await this.fenced(
      async (count) =>
        (await this.mutexOr(this.run, INSPECT, SHARED_INSPECT, queueScriptKeys(names, count), [
          count ?? 0,
        ])) as unknown[],
    );
    return inspectInfo(reply);
  }

  /**
   * Frees the key whoever holds it and hands it to the first in line, as a release would. The
   * mutex script serves both layouts: it deletes the key (every shared or counted holder with it).
   */
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
      Promise.allSettled(waiters.map(([, waiter]) => this.leaveQueue(waiter))),
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
  private async leaveQueue(waiter: Waiter): Promise<void> {
    if (!waiter.queued) return;
    waiter.queued = false;
    try {
      const { names, member, token, mutex } = waiter;
      await this.fenced((count) =>
        this.leave(this.run, queueScriptKeys(names, count), member, token, count, mutex),
      );
    } catch (err) {
      if (this.#connection.isDown() && !this.closed) this.unsentLeaves.set(waiter.token, waiter);
      throw err;
    }
  }

  /**
   * Takes `member` out of the key's queue and drops what `token` holds of it (a hand-over that
   * came too late), passing the key on: the mutex's script for a mutex (the sharing one if the
   * key is a hash), the sharing one otherwise.
   */
  private leave(
    run: ScriptRunner,
    keys: readonly string[],
    member: string,
    token: string,
    count: number | null,
    mutex: boolean,
  ): Promise<unknown> {
    const args = [member, token, count ?? 0];
    return mutex
      ? this.mutexOr(run, LEAVE_QUEUE, SHARED_LEAVE, keys, args)
      : run(SHARED_LEAVE, keys, args);
  }

  private sendUnsentLeaves(): void {
    const leaves = [...this.unsentLeaves.values()];
    this.unsentLeaves.clear();
    for (const waiter of leaves) {
      waiter.queued = true;
      this.leaveQueue(waiter).catch(() => undefined);
    }
  }

  /**
   * Runs a mutex script and, if the key turned out a hash of shared or counted holders
   * (WRONGTYPE), the sharing script with the same KEYS and ARGV. The mutex's own calls pay
   * nothing for it.
   */
  private async mutexOr(
    run: ScriptRunner,
    mutexScript: RedisScript,
    sharedScript: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await run(mutexScript, keys, args);
    } catch (err) {
      if (!isWrongType(err)) throw err;
    }
    return run(sharedScript, keys, args);
  }

  /** {@link script} as a {@link ScriptRunner}. */
  private readonly run: ScriptRunner = (script, keys, args) => this.script(script, keys, args);

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
    request: GrantRequest,
    waiterTtlMs: number,
    member = '',
  ): Promise<AttemptReply> {
    const { token, ttlMs } = request;
    const mutex = isMutex(request);
    const reply = await this.fenced(async (count) => {
      const keys = queueScriptKeys(names, count);
      const undo = (late: Promise<unknown>): void => {
        late
          .then(() => this.leave(this.runRaw, keys, member, token, count, mutex))
          .catch(() => undefined);
      };
      if (mutex) {
        try {
          return (await this.script(
            ACQUIRE,
            keys,
            [token, ttlMs, waiterTtlMs, member, count ?? 0],
            undo,
          )) as AttemptReply;
        } catch (err) {
          // The key is a hash: shared or counted holders, which the sharing script weighs.
          if (!isWrongType(err)) throw err;
        }
      }
      const [mode, permits] = mutex ? ['x', 1] : [modeLetter(request), request.permits ?? 1];
      return (await this.script(
        SHARED_ACQUIRE,
        keys,
        [token, ttlMs, waiterTtlMs, member, mode, permits, count ?? 0],
        undo,
      )) as AttemptReply;
    });
    if (reply[0] === -1) throw permitsDisagreement(request.key, reply[1], request.permits ?? 1);
    if (!mutex && (reply[0] === 1 || reply[0] === 2)) this.noteShared(token);
    return reply;
  }

  /** Remembers a shared or counted grant's token (see {@link sharedTokens}). */
  private noteShared(token: string): void {
    if (this.sharedTokens.size >= SHARED_TOKENS_MAX) this.sharedTokens.clear();
    this.sharedTokens.add(token);
  }

  /** A {@link ScriptRunner} straight on the client (late clean-ups, whatever the connection state). */
  private readonly runRaw: ScriptRunner = (script, keys, args) =>
    runScript(this.#client, script, keys, args);

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
      this.listening = true;
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

  /**
   * A hand-over to one of this backend's waiters, "<tagged token> <fence> [<slot>]": from the
   * channel, or from the reply of a release made here.
   */
  private handedOver(message: string): void {
    const [token, fence, slot] = message.split(' ');
    const waiter = this.waiters.get(token);
    if (!waiter) return; // gave up meanwhile: its leave passes the lock on
    // A mutex script handed a free key to a shared or counted waiter (no slot said): it holds
    // the key as a string that its next attempt turns into its hash field; ask now.
    if (waiter.mutex || slot !== undefined) {
      waiter.handedOver = Number(fence);
      waiter.handedPermit = Number(slot ?? 0);
    }
    waiter.notify();
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
      client.on('message', (_channel, message) => this.handedOver(message));
    }
    return this.#subscriber;
  }
}

/** A grant from an attempt's `{1, fence, slot?}` reply, taken at `sentAt`. */
function grantOf(reply: AttemptReply, sentAt: number): LockGrant {
  return { fence: Number(reply[1]), grantedAt: sentAt, permit: Number(reply[2] ?? 0) };
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
