import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import type { RedisKeyspace } from '../redis/redis-keys';
import { forceReleaseRound, inspectRound, releaseRound } from './admin-rounds';
import { grantRound } from './grant-round';
import type { Quorum } from './quorum';
import { renewRound } from './renew-round';

/**
 * `type: 'redlock'`: the Redlock algorithm over N independent Redis nodes, on any client the
 * Redis port adapts, with what the algorithm leaves to its users: our own owner tokens,
 * monotonic deadlines with its drift allowance ({@link RedlockLockBackend.leaseValidity}),
 * refusal of grants with no validity left, failures told apart as "not ours" (`false`) versus
 * "no quorum" (`LockBackendError`, saying what each node answered), a renewal that puts back
 * copies a node lost (restarted empty), and a fencing token made sound across the quorum (see
 * `grant-round.ts`). A node whose client is known to be disconnected is counted out at once,
 * with its reason, instead of being asked. Each round is a file of its own; this class only puts
 * them together.
 */
export class RedlockLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'poll',
    // Shared and counted locks are not built on Redlock: the engine refuses them.
    shared: false,
    permits: false,
  };
  private closed = false;
  // ES-private: util.inspect of a lock handle reaches this backend, and must not print the
  // clients' options (their passwords).
  readonly #quorum: Quorum;

  constructor(
    quorum: Quorum,
    private readonly keyspace: RedisKeyspace,
    private readonly ownsClients: boolean,
    private readonly backendName: string,
    /** Clock drift allowed between the nodes, as a fraction of the ttl. */
    private readonly driftFactor: number,
  ) {
    this.#quorum = quorum;
  }

  /**
   * The ttl less the Redlock algorithm's allowance for clock drift between independent nodes
   * (`driftFactor * ttl + 2 ms`): a lease is trusted only that long from when it was asked for.
   */
  leaseValidity(ttlMs: number): number {
    if (this.driftFactor <= 0) return ttlMs; // drift explicitly ruled out by the user
    return ttlMs - Math.round(this.driftFactor * ttlMs) - 2;
  }

  tryAcquire({ key, token, ttlMs }: GrantRequest): Promise<LockGrant | null> {
    return grantRound(this.#quorum, {
      names: this.keyspace.names(key),
      token,
      ttlMs,
      validityMs: this.leaseValidity(ttlMs),
      backendName: this.backendName,
    });
  }

  /** One lease's renewal: {@link RedlockLockBackend.extendMany} of one. */
  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const [result] = await this.extendMany([{ key, token, ttlMs }]);
    if (result instanceof Error) throw result;
    return result;
  }

  extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    return renewRound(this.#quorum, this.keyspace, requests);
  }

  release(key: string, token: string): Promise<boolean> {
    return releaseRound(this.#quorum, this.keyspace.names(key), token, this.backendName);
  }

  async isLocked(key: string): Promise<boolean> {
    return (await this.inspect(key)).held;
  }

  inspect(key: string): Promise<StoreLockInfo> {
    return inspectRound(this.#quorum, this.keyspace.names(key), this.backendName);
  }

  forceRelease(key: string): Promise<boolean> {
    return forceReleaseRound(this.#quorum, this.keyspace.names(key), this.backendName);
  }

  /** Healthy while a quorum of nodes answers: that is what every lock operation needs. */
  async ping(): Promise<void> {
    const answers = await this.#quorum.onEvery((node) => node.command(['PING']));
    if (this.#quorum.answered(answers) < this.#quorum.size) {
      throw this.#quorum.noQuorum('ping', answers);
    }
  }

  /**
   * Bootstrap with `startup: 'fail'`: resolves once a quorum answers a PING; rejects with what
   * the others said.
   */
  async ready(): Promise<void> {
    const answers = await this.#quorum.onEvery((node) => node.command(['PING']));
    if (this.#quorum.answered(answers) < this.#quorum.size) {
      throw new Error(this.#quorum.failure('ping', answers));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.#quorum.nodes.map((node) => node.close(this.ownsClients)));
  }
}
