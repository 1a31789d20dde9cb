import { LockBackendError } from '../../errors/lock.errors';
import { withTimeout } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
} from '../../core/contract/lock-backend';
import { messageOf } from '../../core/shared/error-message';
import { closeClient, runScript, type RedisLikeClient } from '../redis/redis-client';
import { redisLockNames } from '../redis/redis-keys';
import { RAISE_FENCE } from '../redis/redis-scripts';

/** One independent Redis node of a Redlock set. */
export interface RedlockNode extends RedisLikeClient {
  incr(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  ping(): Promise<string>;
}

/** The part of `redlock@4.2.0` used here (its typings are outdated, so typed locally). */
export interface Redlock4 {
  lock(resource: string, ttl: number): Promise<unknown>;
  unlock(lock: { resource: string; value: string }): Promise<void>;
  /** v4's internal quorum operation; with a value it runs the compare-token extend script. */
  _lock(resource: string, value: string, ttl: number, options: object): Promise<unknown>;
  _random(): string;
}

/** Why a quorum operation failed, from probing every node. */
interface Census {
  reachable: number;
  down: string[];
}

/**
 * `type: 'redlock'`: the `redlock` package (v4.2.0) over N independent Redis nodes, with what
 * the package does not do itself: our own owner tokens, monotonic deadlines with its drift
 * allowance ({@link RedlockLockBackend.leaseValidity}), refusal of grants with no validity left, failures classified as
 * "not ours" (false) versus "no quorum / node down" (LockBackendError), and a fencing token
 * made sound across the quorum by two rounds (INCR everywhere, then raise every node to the
 * max before the grant counts).
 */
export class RedlockLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'poll',
  };
  private readonly quorum: number;
  private closed = false;

  constructor(
    private readonly redlock: Redlock4,
    private readonly nodes: readonly RedlockNode[],
    private readonly labels: readonly string[],
    private readonly ownsClients: boolean,
    private readonly backendName: string,
    /** Clock drift allowed between the nodes, as a fraction of the ttl. */
    private readonly driftFactor: number,
    /** Bound on each per-node probe or fence command. */
    private readonly nodeTimeout: number,
  ) {
    this.quorum = Math.floor(nodes.length / 2) + 1;
  }

  /**
   * The ttl less the Redlock algorithm's allowance for clock drift between independent nodes
   * (`driftFactor * ttl + 2 ms`): a lease is trusted only that long from when it was asked for.
   */
  leaseValidity(ttlMs: number): number {
    if (this.driftFactor <= 0) return ttlMs; // drift explicitly ruled out by the user
    return ttlMs - Math.round(this.driftFactor * ttlMs) - 2;
  }

  async tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    const names = redisLockNames(key);
    // v4 draws the lock value from `_random()`; a per-call view makes it use our owner token.
    const view = Object.create(this.redlock) as Redlock4;
    view._random = () => token;
    try {
      await view.lock(names.lock, ttlMs);
    } catch (err) {
      await this.classify(names.lock, 'acquire', err);
      return null;
    }
    try {
      return { fence: await this.fence(names.fence) };
    } catch (err) {
      // No fence, no grant: give the quorum back before reporting.
      await this.redlock.unlock({ resource: names.lock, value: token }).catch(() => undefined);
      throw err;
    }
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    try {
      await this.redlock._lock(resource, token, ttlMs, {});
      return true;
    } catch (err) {
      await this.classify(resource, 'extend', err);
      return false;
    }
  }

  async release(key: string, token: string): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    try {
      await this.redlock.unlock({ resource, value: token });
      return true;
    } catch (err) {
      await this.classify(resource, 'release', err);
      return false;
    }
  }

  async isLocked(key: string): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    const results = await this.onEveryNode((node) => node.exists(resource));
    const answered = results.filter((r) => r.ok);
    if (answered.length < this.quorum) throw this.noQuorum('isLocked', results);
    return answered.filter((r) => r.value === 1).length >= this.quorum;
  }

  /** Healthy while a quorum of nodes answers: that is what every lock operation needs. */
  async ping(): Promise<void> {
    const results = await this.onEveryNode((node) => node.ping());
    if (results.filter((r) => r.ok).length < this.quorum) throw this.noQuorum('ping', results);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClients) await Promise.all(this.nodes.map((n) => closeClient(n)));
  }

  /**
   * Two rounds: INCR the key's counter on every node and take the max over at least a quorum;
   * then raise every node to that max and count the grant only once a quorum confirmed. Any
   * later grant's INCR reaches a quorum that intersects this one, so its fence is higher. Safe
   * as long as nodes keep their data (AOF with fsync); a node restarted empty can lower it.
   */
  private async fence(fenceKey: string): Promise<number> {
    const counts = await this.onEveryNode((node) => node.incr(fenceKey));
    const ok = counts.filter((c) => c.ok);
    if (ok.length < this.quorum) throw this.noQuorum('fence (INCR)', counts);
    const max = Math.max(...ok.map((c) => Number(c.value)));
    const raised = await this.onEveryNode((node) =>
      runScript(node, RAISE_FENCE, [fenceKey], [max]),
    );
    if (raised.filter((r) => r.ok).length < this.quorum)
      throw this.noQuorum('fence (raise)', raised);
    return max;
  }

  /**
   * After a failed quorum operation: if too few nodes answer, it is an outage
   * (LockBackendError, so the core keeps its lease until the deadline instead of declaring
   * loss); otherwise the lock is simply busy / not ours (the caller returns null / false).
   */
  private async classify(resource: string, op: string, cause: unknown): Promise<void> {
    const census = await this.census(resource);
    if (census.reachable < this.quorum) {
      throw new LockBackendError(
        this.backendName,
        `${op}: no quorum, ${census.reachable} of ${this.nodes.length} nodes reachable (need ${this.quorum}); down: ${census.down.join('; ')}`,
        { cause },
      );
    }
  }

  private async census(resource: string): Promise<Census> {
    const results = await this.onEveryNode((node) => node.get(resource));
    return {
      reachable: results.filter((r) => r.ok).length,
      down: results.filter((r) => !r.ok).map((r) => `${r.node}: ${r.error}`),
    };
  }

  private noQuorum(
    op: string,
    results: ReadonlyArray<{ ok: boolean; node: string; error?: string }>,
  ): LockBackendError {
    const down = results.filter((r) => !r.ok).map((r) => `${r.node}: ${r.error}`);
    return new LockBackendError(
      this.backendName,
      `${op}: no quorum, ${results.length - down.length} of ${this.nodes.length} nodes answered (need ${this.quorum}); down: ${down.join('; ')}`,
    );
  }

  private onEveryNode<T>(
    fn: (node: RedlockNode) => Promise<T>,
  ): Promise<Array<{ ok: boolean; node: string; value?: T; error?: string }>> {
    return Promise.all(
      this.nodes.map(async (node, i) => {
        try {
          const value = await withTimeout(fn(node), this.nodeTimeout);
          return { ok: true, node: this.labels[i], value };
        } catch (err) {
          return { ok: false, node: this.labels[i], error: messageOf(err) };
        }
      }),
    );
  }
}
