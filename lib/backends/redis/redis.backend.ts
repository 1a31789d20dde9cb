import type { LockBackend, LockBackendCapabilities, LockGrant } from '../lock-backend.interface';
import { closeClient, logConnectionErrors, runScript, type RedisLikeClient } from './redis-client';
import { redisLockNames } from './redis-keys';
import { ACQUIRE, EXTEND, RELEASE } from './redis-scripts';

/** How long a channel stays subscribed after its last waiter left (the next wait cycle reuses it). */
const SUBSCRIPTION_LINGER_MS = 2_000;

/**
 * `type: 'redis'`: one Redis node or a Redis Cluster. Acquire is `SET NX PX` plus `INCR` of the
 * key's fence counter in one script; extend and release compare the owner token. Waiters do
 * not poll: a release publishes on the key's channel, and waiters (sharing one subscriber
 * connection) retry on that message or when the holder's remaining PTTL runs out.
 */
export class RedisLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = { leaseBased: true, fencing: true };

  private subscriber?: RedisLikeClient;
  /** Wake-up callbacks per channel; the channel is subscribed while this has entries. */
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Pending SUBSCRIBE per channel, so concurrent waiters share one round trip. */
  private readonly subscribing = new Map<string, Promise<unknown>>();
  /** Channels with no waiter left, unsubscribed after a grace period (waiters come in cycles). */
  private readonly lingering = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly client: RedisLikeClient,
    /** Whether the module created `client` (and so closes it). */
    private readonly ownsClient: boolean,
    private readonly backendName: string,
  ) {
    if (ownsClient) logConnectionErrors(client, `redis backend "${backendName}"`);
  }

  async tryAcquire(key: string, token: string, ttlMs: number): Promise<LockGrant | null> {
    const names = redisLockNames(key);
    const reply = (await runScript(
      this.client,
      ACQUIRE,
      [names.lock, names.fence],
      [token, ttlMs],
    )) as [number, number];
    return reply[0] === 1 ? { fence: Number(reply[1]) } : null;
  }

  async waitForRelease(key: string, maxMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closed) return;
    const names = redisLockNames(key);
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    // The bound and the abort are armed first: a Redis that does not answer SUBSCRIBE or PTTL
    // (down, commands queued offline) must not hold the waiter past maxMs or past shutdown.
    let timer = setTimeout(wake, maxMs);
    signal.addEventListener('abort', wake, { once: true });
    try {
      const look = (async () => {
        await this.subscribe(names.channel, wake);
        // Subscribed first, then look: a release published before the SUBSCRIBE took effect
        // is seen here as a missing key, so no wake-up is ever lost.
        return this.client.pttl(names.lock);
      })();
      look.catch(() => undefined); // a late failure after we stopped waiting is nobody's error
      const pttl = await Promise.race([look, woken.then(() => undefined)]);
      if (pttl === undefined || pttl === -2) return;
      if (pttl > 0 && pttl < maxMs) {
        clearTimeout(timer);
        timer = setTimeout(wake, pttl); // the holder's lease ends sooner than maxMs
      }
      await woken;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', wake);
      this.unsubscribe(names.channel, wake);
    }
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    return (
      Number(await runScript(this.client, EXTEND, [redisLockNames(key).lock], [token, ttlMs])) === 1
    );
  }

  async release(key: string, token: string): Promise<boolean> {
    const names = redisLockNames(key);
    return (
      Number(await runScript(this.client, RELEASE, [names.lock], [token, names.channel])) === 1
    );
  }

  async isLocked(key: string): Promise<boolean> {
    return (await this.client.exists(redisLockNames(key).lock)) === 1;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.lingering.values()) clearTimeout(timer);
    this.lingering.clear();
    for (const set of this.waiters.values()) for (const wake of set) wake();
    this.waiters.clear();
    const closing: Promise<void>[] = [];
    if (this.subscriber) closing.push(closeClient(this.subscriber));
    if (this.ownsClient) closing.push(closeClient(this.client));
    await Promise.all(closing);
  }

  private async subscribe(channel: string, wake: () => void): Promise<void> {
    const linger = this.lingering.get(channel);
    if (linger) {
      // Still subscribed from the previous wait cycle: reuse it.
      clearTimeout(linger);
      this.lingering.delete(channel);
      this.waiters.set(channel, new Set([wake]));
      return;
    }
    let set = this.waiters.get(channel);
    if (!set) this.waiters.set(channel, (set = new Set()));
    set.add(wake);
    const subscriber = this.subscriberClient();
    let pending = this.subscribing.get(channel);
    if (!pending) {
      if (set.size > 1) return; // already subscribed by an earlier waiter
      pending = subscriber.subscribe(channel).finally(() => this.subscribing.delete(channel));
      this.subscribing.set(channel, pending);
    }
    await pending;
  }

  private unsubscribe(channel: string, wake: () => void): void {
    const set = this.waiters.get(channel);
    if (!set) return;
    set.delete(wake);
    if (set.size > 0) return;
    this.waiters.delete(channel);
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.lingering.delete(channel);
      if (!this.closed && !this.waiters.has(channel))
        this.subscriber?.unsubscribe(channel).catch(() => undefined);
    }, SUBSCRIPTION_LINGER_MS);
    timer.unref();
    this.lingering.set(channel, timer);
  }

  /** One shared subscriber connection per backend, made on first wait (never before). */
  private subscriberClient(): RedisLikeClient {
    if (!this.subscriber) {
      this.subscriber = this.client.duplicate();
      logConnectionErrors(this.subscriber, `redis backend "${this.backendName}" subscriber`);
      this.subscriber.on('message', (channel) => {
        for (const wake of this.waiters.get(channel) ?? []) wake();
      });
    }
    return this.subscriber;
  }
}
