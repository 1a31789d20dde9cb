import type {
  GrantRequest,
  GrantShape,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import { forceReleaseKey, inspectKey } from './admin';
import { attempt, isMutex, leanAttempt } from './attempt';
import type { RedisPort } from './port/redis-port';
import type { RedisLockNames } from './redis-keys';
import { RedisWaiting } from './redis-waiting';
import type { RedisStore } from './redis-store';
import type { RestartGuard } from './restart-guard';
import { renewLeases } from './renewals';
import { MUTEX_RELEASE } from './scripts/mutex';
import { RELEASE } from './scripts/release';

/** Longest a grant waits for the node's uptime to be read (the engine bounds the call anyway). */
const GUARD_READ_MS = 10_000;

/**
 * `type: 'redis'`: one Redis node or a Redis Cluster, on any client the port adapts. A mutex's
 * acquire is `SET NX PX` plus a draw of the key's fence bucket counter in one script, the fence
 * kept in the lock value (`<token> <fence>`); renewal and release compare the owner token. Shared
 * and counted holders keep a hash at the lock's name (see `scripts/lua-holders.ts`); every
 * script serves both layouts, a mutex on its fast path. Waiting is a FIFO queue with hand-over
 * (see {@link RedisWaiting}); renewals are batched (see `renewals.ts`); a node that restarted
 * grants nothing until it has been up for longer than a lease (see {@link RestartGuard}). This
 * class only puts the parts together.
 */
export class RedisLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
  };
  private readonly waiting: RedisWaiting;
  private closed = false;
  // ES-private: util.inspect of a lock handle reaches this backend, and must not print a
  // client's options (its password).
  readonly #store: RedisStore;
  readonly #port: RedisPort;

  constructor(
    store: RedisStore,
    port: RedisPort,
    /** Whether the module made the client (and so closes it). */
    private readonly ownsClient: boolean,
    private readonly guard: RestartGuard,
  ) {
    this.#store = store;
    this.#port = port;
    this.waiting = new RedisWaiting(store);
  }

  /**
   * Bootstrap with `startup: 'fail'`: resolves once the store answers a PING within
   * `timeoutMs`, rejects at once with the reason when the client cannot connect.
   */
  ready(timeoutMs: number): Promise<void> {
    return this.#store.connection.ready(() => this.#port.command(['PING']), timeoutMs);
  }

  tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    this.guard.noteTtl(request.ttlMs);
    if (!this.guard.trustedNow()) return this.tryAfterRestart(request);
    const names = this.#store.keyspace.names(request.key);
    if (!isMutex(request)) return this.tryGeneral(request, names);
    return leanAttempt(this.#store, names, request).then((fence) =>
      fence === null ? this.tryGeneral(request, names) : { fence: Number(fence), permit: 0 },
    );
  }

  /** One attempt by the general script: a busy key, a queue, shared or counted holders. */
  private async tryGeneral(
    request: GrantRequest,
    names: RedisLockNames,
  ): Promise<LockGrant | null> {
    const reply = await attempt(this.#store, names, request, 0);
    return reply[0] === 1 ? { fence: Number(reply[1]), permit: Number(reply[2] ?? 0) } : null;
  }

  acquire(request: QueuedRequest): Promise<LockGrant | null> {
    if (this.closed) return Promise.resolve(null);
    this.guard.noteTtl(request.ttlMs);
    if (!this.guard.trustedNow()) return this.acquireAfterRestart(request);
    return this.waiting.acquire(request, this.#store.keyspace.names(request.key));
  }

  /** {@link tryAcquire} while the node's restart guard is not known to trust it: busy until it does. */
  private async tryAfterRestart(request: GrantRequest): Promise<LockGrant | null> {
    if ((await this.guard.untilTrusted(GUARD_READ_MS)) > 0) return null;
    return this.tryAcquire(request);
  }

  /** {@link acquire} while the guard is not known to trust the node: it waits that out first. */
  private async acquireAfterRestart(request: QueuedRequest): Promise<LockGrant | null> {
    const startedAt = monotonicNow();
    const wait = await this.guard.untilTrusted(GUARD_READ_MS);
    if (wait > 0) {
      // Busy as long as the node may have forgotten a holder: the caller waits it out.
      request.onQueued?.();
      await sleep(Math.min(wait, request.waitMs), request.signal);
      if (request.signal.aborted || this.closed || wait >= request.waitMs) return null;
    }
    const waitMs = request.waitMs - (monotonicNow() - startedAt);
    return this.waiting.acquire({ ...request, waitMs }, this.#store.keyspace.names(request.key));
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const [result] = await renewLeases(this.#store, [{ key, token, ttlMs }]);
    if (result instanceof Error) throw result;
    return result;
  }

  extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    return renewLeases(this.#store, requests);
  }

  /**
   * Drops the caller's hold and hands the key on. This process's own waiters granted by it are
   * told here, and the release resolves only once their grants went through (a turn of the event
   * loop): whatever the releasing caller does next (its next acquire's write) must not hold up
   * the next holder.
   */
  release(key: string, token: string, grant?: GrantShape): Promise<boolean> {
    const names = this.#store.keyspace.names(key);
    const mutex =
      grant && (grant.mode ?? 'exclusive') === 'exclusive' && (grant.permits ?? 1) === 1;
    if (!mutex || names.contended) return this.releaseAny(names, token);
    return this.#store.keyScript(MUTEX_RELEASE, names, [token], undefined, 1).then((quick) => {
      if (quick !== null) return Number(quick) === 1;
      names.contended = true;
      return this.releaseAny(names, token);
    });
  }

  /** {@link release} by the general script: any kind of holder, and the queue's hand-overs. */
  private async releaseAny(names: RedisLockNames, token: string): Promise<boolean> {
    const released = (await this.#store.keyScript(RELEASE, names, [
      token,
      this.waiting.channelName,
    ])) as unknown[];
    if (released.length > 1) {
      for (let i = 1; i < released.length; i++) this.waiting.handedOver(String(released[i]));
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return Number(released[0]) === 1;
  }

  async isLocked(key: string): Promise<boolean> {
    return (await inspectKey(this.#store, key)).held;
  }

  inspect(key: string): Promise<StoreLockInfo> {
    return inspectKey(this.#store, key);
  }

  forceRelease(key: string): Promise<boolean> {
    return forceReleaseKey(this.#store, key);
  }

  async ping(): Promise<void> {
    await this.#store.command(['PING']);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.waiting.close();
    if (this.ownsClient) await this.#port.close();
    this.#store.connection.detach();
  }
}
