import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { withTimeout } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { closeClient, runScript, type RedisLikeClient } from '../redis/redis-client';
import { RedisNotConnectedError, type RedisConnection } from '../redis/redis-connection';
import { redisLockNames } from '../redis/redis-keys';
import { RAISE_FENCE } from '../redis/redis-scripts';
import { DELETE_COPY, INSPECT_COPY, RENEW_COPY, RESTORE_COPY } from './redlock-scripts';

/** One independent Redis node of a Redlock set. */
export interface RedlockNode extends RedisLikeClient {
  incr(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  ping(): Promise<string>;
}

/** A node with its connection state and the name messages give it (`host:port`). */
export interface QuorumNode {
  readonly client: RedlockNode;
  readonly connection: RedisConnection;
  readonly label: string;
}

/** The part of `redlock@4.2.0` used here (its typings are outdated, so typed locally). */
export interface Redlock4 {
  lock(resource: string, ttl: number): Promise<unknown>;
  unlock(lock: { resource: string; value: string }): Promise<void>;
  _random(): string;
}

/** What one node answered to one command. */
type NodeAnswer<T> =
  | { readonly node: string; readonly ok: true; readonly value: T }
  | {
      readonly node: string;
      readonly ok: false;
      /** The node answered, with an error (`WRONGTYPE`...): reachable, but it refused. */
      readonly refused: boolean;
      /** What went wrong, redacted. */
      readonly error: string;
      readonly cause: unknown;
    };

/**
 * `type: 'redlock'`: the `redlock` package (v4.2.0) over N independent Redis nodes, with what
 * the package does not do itself: our own owner tokens, monotonic deadlines with its drift
 * allowance ({@link RedlockLockBackend.leaseValidity}), refusal of grants with no validity left,
 * failures classified as "not ours" (false) versus "no quorum" (LockBackendError, saying what
 * each node answered), a renewal that puts back copies a node lost (restarted empty), and a
 * fencing token made sound across the quorum by two rounds (INCR everywhere, then raise every
 * node to the max before the grant counts). A node whose client is known to be disconnected is
 * counted out at once, with its reason, instead of being asked.
 */
export class RedlockLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: true,
    fencing: true,
    waiting: 'poll',
  };
  private readonly quorum: number;
  private closed = false;
  // ES-private: util.inspect of a lock handle reaches this backend, and must not print the
  // clients' options (their passwords) or the redactor's secrets.
  readonly #redlock: Redlock4;
  readonly #nodes: readonly QuorumNode[];
  readonly #redactor: SecretRedactor;

  constructor(
    redlock: Redlock4,
    nodes: readonly QuorumNode[],
    private readonly ownsClients: boolean,
    private readonly backendName: string,
    /** Clock drift allowed between the nodes, as a fraction of the ttl. */
    private readonly driftFactor: number,
    /** Bound on each per-node command. */
    private readonly nodeTimeout: number,
    /** Scrubs the configuration's secrets from what this backend raises. */
    redactor: SecretRedactor,
  ) {
    this.#redlock = redlock;
    this.#nodes = nodes;
    this.#redactor = redactor;
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
    this.requireQuorum('acquire');
    // v4 draws the lock value from `_random()`; a per-call view makes it use our owner token.
    const view = Object.create(this.#redlock) as Redlock4;
    view._random = () => token;
    try {
      await view.lock(names.lock, ttlMs);
    } catch {
      await this.classify(names.lock, 'acquire');
      return null;
    }
    try {
      return { fence: await this.fence(names.fence) };
    } catch (err) {
      // No fence, no grant: give the quorum back before reporting.
      await this.#redlock.unlock({ resource: names.lock, value: token }).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Renews every node's copy; counts when a quorum renewed. Then puts back the copies that were
   * missing (a node restarted empty, a copy expired early): otherwise the lock would rest on
   * fewer nodes at every restart, and one more node down would lose it with a quorum up. Only
   * after a quorum renewed, so a lock freed everywhere (`forceRelease`) is never put back.
   */
  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    this.requireQuorum('extend');
    const answers = await this.onEveryNode((node) =>
      runScript(node, RENEW_COPY, [resource], [token, ttlMs]),
    );
    const renewed = answers.filter((a) => a.ok && Number(a.value) === 1).length;
    if (renewed >= this.quorum) {
      const missing = this.#nodes.filter((_, i) => {
        const answer = answers[i];
        return answer.ok && Number(answer.value) === 0;
      });
      await this.onNodes(missing, (node) =>
        runScript(node, RESTORE_COPY, [resource], [token, ttlMs]),
      );
      return true;
    }
    // A quorum answered and it is not ours there: lost. Fewer answered: an outage.
    if (answers.filter((a) => a.ok).length >= this.quorum) return false;
    throw this.noQuorum('extend', answers);
  }

  async release(key: string, token: string): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    this.requireQuorum('release');
    try {
      await this.#redlock.unlock({ resource, value: token });
      return true;
    } catch {
      await this.classify(resource, 'release');
      return false;
    }
  }

  async isLocked(key: string): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    const results = await this.onEveryNode((node) => node.exists(resource));
    if (results.filter((r) => r.ok).length < this.quorum) throw this.noQuorum('isLocked', results);
    return results.filter((r) => r.ok && r.value === 1).length >= this.quorum;
  }

  /**
   * Held when a quorum of nodes hold the same token. `fence`: the largest counter among the
   * nodes that answered (the holder's fence, unless a grant failed half-way on some node since:
   * then a little higher, never lower); `remainingMs`: until fewer than a quorum of copies remain.
   * No queue, so no `waiting`.
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const names = redisLockNames(key);
    const answers = await this.onEveryNode(
      async (node) =>
        (await runScript(node, INSPECT_COPY, [names.lock, names.fence], [])) as [
          string,
          number,
          number,
        ],
    );
    const views = answers.flatMap((a) => (a.ok ? [a.value] : []));
    if (views.length < this.quorum) throw this.noQuorum('inspect', answers);
    const holder = this.quorumHolder(views.map(([token]) => token));
    const fence = Math.max(...views.map(([, , counter]) => Number(counter)));
    if (holder === undefined) return { held: false, fence, holders: 0 };
    // Copies expire one by one: the lock ends when the quorum-th longest-lived copy does.
    const lives = views
      .filter(([token]) => token === holder)
      .map(([, pttl]) => Number(pttl))
      .sort((a, b) => b - a);
    return { held: true, fence, remainingMs: Math.max(0, lives[this.quorum - 1]), holders: 1 };
  }

  /**
   * Deletes the key's copy on every node, whoever holds it; `true` when a quorum held it. The
   * holder's next renewal finds no copy to renew (and puts none back), so it fails.
   */
  async forceRelease(key: string): Promise<boolean> {
    const resource = redisLockNames(key).lock;
    const answers = await this.onEveryNode(async (node) =>
      String(await runScript(node, DELETE_COPY, [resource], [])),
    );
    const deleted = answers.flatMap((a) => (a.ok ? [a.value] : []));
    if (deleted.length < this.quorum) throw this.noQuorum('forceRelease', answers);
    return this.quorumHolder(deleted) !== undefined;
  }

  /** Healthy while a quorum of nodes answers: that is what every lock operation needs. */
  async ping(): Promise<void> {
    const results = await this.onEveryNode((node) => node.ping());
    if (results.filter((r) => r.ok).length < this.quorum) throw this.noQuorum('ping', results);
  }

  /**
   * Bootstrap with `startup: 'fail'`: resolves once a quorum answers a PING; rejects with what
   * the others said.
   */
  async ready(): Promise<void> {
    const results = await this.onEveryNode((node) => node.ping());
    if (results.filter((r) => r.ok).length < this.quorum) {
      throw new Error(this.quorumFailure('ping', results));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClients) await Promise.all(this.#nodes.map((n) => closeClient(n.client)));
    for (const node of this.#nodes) node.connection.detach();
  }

  /**
   * Two rounds: INCR the key's counter on every node and take the max over at least a quorum;
   * then raise every node to that max and count the grant only once a quorum confirmed. Any
   * later grant's INCR reaches a quorum that intersects this one, so its fence is higher. Safe
   * as long as nodes keep their data (AOF with fsync); a node restarted empty can lower it.
   */
  private async fence(fenceKey: string): Promise<number> {
    const counts = await this.onEveryNode((node) => node.incr(fenceKey));
    const values = counts.flatMap((c) => (c.ok ? [Number(c.value)] : []));
    if (values.length < this.quorum) throw this.noQuorum('fence (INCR)', counts);
    const max = Math.max(...values);
    const raised = await this.onEveryNode((node) =>
      runScript(node, RAISE_FENCE, [fenceKey], [max]),
    );
    if (raised.filter((r) => r.ok).length < this.quorum)
      throw this.noQuorum('fence (raise)', raised);
    return max;
  }

  /** The token a quorum of `tokens` agree on ('' = no copy), if any. */
  private quorumHolder(tokens: readonly string[]): string | undefined {
    const counts = new Map<string, number>();
    for (const token of tokens) if (token) counts.set(token, (counts.get(token) ?? 0) + 1);
    for (const [token, count] of counts) if (count >= this.quorum) return token;
    return undefined;
  }

  /**
   * Fails at once, without asking any node, when fewer than a quorum of clients are connected:
   * the reasons are already known (`ECONNREFUSED`, a closed connection...).
   */
  private requireQuorum(op: string): void {
    const down = this.#nodes.filter((node) => node.connection.isDown());
    if (this.#nodes.length - down.length >= this.quorum) return;
    const reasons = down.map((node) => ({ node, ...this.failure(node.connection.error()) }));
    const said = reasons.map(({ node, message }) => `${node.label}: ${message}`).join('; ');
    throw new LockBackendError(
      this.backendName,
      `${op}: no quorum, ${this.#nodes.length - down.length} of ${this.#nodes.length} nodes connected (need ${this.quorum}); ${said}`,
      { cause: this.#redactor.error(reasons[0].cause) },
    );
  }

  /**
   * After a failed quorum operation: unless a quorum of nodes answers (without an error), it is
   * an outage or a refusal (LockBackendError saying what each node answered, so the core keeps
   * its lease until the deadline instead of declaring loss); otherwise the lock is simply busy /
   * not ours (the caller returns null / false).
   */
  private async classify(resource: string, op: string): Promise<void> {
    const answers = await this.onEveryNode((node) => node.get(resource));
    if (answers.filter((a) => a.ok).length < this.quorum) throw this.noQuorum(op, answers);
  }

  private noQuorum(op: string, answers: ReadonlyArray<NodeAnswer<unknown>>): LockBackendError {
    const firstFailure = answers.find((a) => !a.ok);
    return new LockBackendError(this.backendName, this.quorumFailure(op, answers), {
      cause:
        firstFailure && !firstFailure.ok ? this.#redactor.error(firstFailure.cause) : undefined,
    });
  }

  /**
   * "acquire: no quorum, 1 of 3 nodes answered (need 2); 10.0.0.2:6379: connect ECONNREFUSED
   * 10.0.0.2:6379; 10.0.0.3:6379 answered WRONGTYPE ...": what each failing node said.
   */
  private quorumFailure(op: string, answers: ReadonlyArray<NodeAnswer<unknown>>): string {
    const said = answers.flatMap((a) =>
      a.ok ? [] : [a.refused ? `${a.node} answered ${a.error}` : `${a.node}: ${a.error}`],
    );
    const refusals = answers.some((a) => !a.ok && a.refused) ? ' without an error' : '';
    const ok = answers.length - said.length;
    return `${op}: no quorum, ${ok} of ${this.#nodes.length} nodes answered${refusals} (need ${this.quorum}); ${said.join('; ')}`;
  }

  /** What to say of one node's failure: a disconnected client's reason rather than its wrapper. */
  private failure(err: unknown): { message: string; cause: unknown } {
    const cause = err instanceof RedisNotConnectedError ? err.cause : err;
    return { message: this.#redactor.message(cause), cause };
  }

  private onEveryNode<T>(fn: (node: RedlockNode) => Promise<T>): Promise<NodeAnswer<T>[]> {
    return this.onNodes(this.#nodes, fn);
  }

  /** Runs `fn` on each node, each bounded by `nodeTimeout`, a disconnected one failing at once. */
  private onNodes<T>(
    nodes: readonly QuorumNode[],
    fn: (node: RedlockNode) => Promise<T>,
  ): Promise<NodeAnswer<T>[]> {
    return Promise.all(
      nodes.map(async ({ client, connection, label }): Promise<NodeAnswer<T>> => {
        try {
          const value = await withTimeout(
            connection.run(() => fn(client)),
            this.nodeTimeout,
          );
          return { node: label, ok: true, value };
        } catch (err) {
          const { message, cause } = this.failure(err);
          // A reply error means the node is up and said no (WRONGTYPE, NOPERM, OOM...).
          const refused = (err as Error | undefined)?.name === 'ReplyError';
          return { node: label, ok: false, refused, error: message, cause };
        }
      }),
    );
  }
}
