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
import { Logger } from '@nestjs/common';
import {
  closeClient,
  runScript,
  runScriptBatch,
  type RedisLikeClient,
  type ScriptCall,
} from '../redis/redis-client';
import { RedisNotConnectedError, type RedisConnection } from '../redis/redis-connection';
import { FenceBucketCount } from '../redis/fence-bucket-count';
import {
  DEFAULT_FENCE_BUCKETS,
  FENCE_BUCKETS_META,
  fenceBucket,
  fenceCounterName,
} from '../redis/fence-buckets';
import { legacyFenceOwner, redisLockNames, type RedisLockNames } from '../redis/redis-keys';
import { CARRY_LEGACY, EXTEND_BATCH, keyError } from '../redis/redis-scripts';
import { fenceOf, tokenOf } from './lock-value';
import {
  DELETE_COPY,
  DRAW_FENCE,
  INSPECT_COPY,
  RAISE_FENCE,
  RENEW_COPIES,
  RESTORE_COPIES,
} from './redlock-scripts';

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
    // Shared and counted locks are not built on Redlock yet (issue 19): refused by the engine.
    shared: false,
    permits: false,
  };
  private readonly quorum: number;
  private closed = false;
  // ES-private: util.inspect of a lock handle reaches this backend, and must not print the
  // clients' options (their passwords) or the redactor's secrets.
  readonly #redlock: Redlock4;
  readonly #nodes: readonly QuorumNode[];
  readonly #redactor: SecretRedactor;
  /** Each node's fence bucket count (nodes are independent: each has its own layout). */
  readonly #buckets: ReadonlyMap<QuorumNode, FenceBucketCount>;

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
    /** Fence counters on each node (`fenceBuckets`). */
    fenceBuckets = DEFAULT_FENCE_BUCKETS,
  ) {
    this.#redlock = redlock;
    this.#nodes = nodes;
    this.#redactor = redactor;
    this.quorum = Math.floor(nodes.length / 2) + 1;
    const logger = new Logger('LockService');
    this.#buckets = new Map(
      nodes.map((node) => [
        node,
        new FenceBucketCount(fenceBuckets, (message) =>
          logger.warn(`redlock backend "${backendName}" node ${node.label}: ${message}`),
        ),
      ]),
    );
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
      return { fence: await this.fence(names, token) };
    } catch (err) {
      // No fence, no grant: give the quorum back before reporting.
      await this.#redlock.unlock({ resource: names.lock, value: token }).catch(() => undefined);
      throw err;
    }
  }

  /** One lease's renewal: {@link RedlockLockBackend.extendMany} of one. */
  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const [result] = await this.extendMany([{ key, token, ttlMs }]);
    if (result instanceof Error) throw result;
    return result;
  }

  /**
   * Renews every node's copies of a batch of leases, one script call per node (per
   * {@link EXTEND_BATCH} leases, all in one pipeline), the nodes in parallel; a lease counts as
   * renewed when a quorum renewed it, as lost (`false`) when a quorum answered and fewer renewed,
   * else as failed (a `LockBackendError` saying what each node answered; a node that failed
   * counts against the quorum). Then puts back the renewed leases' missing copies (a node
   * restarted empty, a copy expired early): otherwise the lock would rest on fewer nodes at every
   * restart, and one more node down would lose it with a quorum up. Only after a quorum renewed,
   * so a lock freed everywhere (`forceRelease`) is never put back.
   */
  async extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    if (requests.length === 0) return [];
    this.requireQuorum('extend');
    const calls: ScriptCall[] = [];
    for (let at = 0; at < requests.length; at += EXTEND_BATCH) {
      const part = requests.slice(at, at + EXTEND_BATCH);
      calls.push({
        keys: part.map(({ key }) => redisLockNames(key).lock),
        args: [...part.map((r) => r.token), ...part.map((r) => r.ttlMs)],
      });
    }
    // Per node: one [code, value] or Error per request.
    const answers = await this.onEveryNode(async (client) => {
      const replies = await runScriptBatch(client, RENEW_COPIES, calls);
      return replies.flatMap((reply, j) =>
        calls[j].keys.map((_, k): [number, string] | Error => {
          if (reply instanceof Error) return reply;
          const [code, value] = [(reply as unknown[])[2 * k], (reply as unknown[])[2 * k + 1]];
          return Number(code) === -2 ? keyError(value)! : [Number(code), String(value)];
        }),
      );
    });
    const restores = new Map<QuorumNode, Array<{ request: GrantRequest; value: string }>>();
    const results = requests.map((request, i): boolean | Error => {
      const perNode = answers.map((answer): NodeAnswer<[number, string]> => {
        if (!answer.ok) return answer;
        const value = answer.value[i];
        return value instanceof Error
          ? this.failedAnswer(answer.node, value)
          : { node: answer.node, ok: true, value };
      });
      const renewed = perNode.flatMap((a) => (a.ok && a.value[0] === 1 ? [a.value[1]] : []));
      if (renewed.length >= this.quorum) {
        // A tagged copy's value carries the holder's fence (what inspect reports): prefer it.
        const value = renewed.find((v) => fenceOf(v) !== undefined) ?? renewed[0];
        perNode.forEach((a, n) => {
          if (!a.ok || a.value[0] !== 0) return;
          const node = this.#nodes[n];
          restores.set(node, [...(restores.get(node) ?? []), { request, value }]);
        });
        return true;
      }
      // A quorum answered and it is not ours there: lost. Fewer answered: an outage.
      if (perNode.filter((a) => a.ok).length >= this.quorum) return false;
      return this.noQuorum('extend', perNode);
    });
    await Promise.all(
      [...restores].map(([node, copies]) =>
        this.onNodes([node], (client) =>
          runScript(
            client,
            RESTORE_COPIES,
            copies.map(({ request }) => redisLockNames(request.key).lock),
            [...copies.map(({ value }) => value), ...copies.map(({ request }) => request.ttlMs)],
          ),
        ),
      ),
    );
    if (results.every((r) => r instanceof Error)) throw results[0];
    return results;
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
    const answers = await this.onEveryNode((client, node) =>
      this.fencedOn(
        node,
        async (count) =>
          (await runScript(
            client,
            INSPECT_COPY,
            [names.lock, counterOf(names, count), names.legacyFence, FENCE_BUCKETS_META],
            [count],
          )) as [string, number, number],
      ),
    );
    const views = answers.flatMap((a) => (a.ok ? [a.value] : []));
    if (views.length < this.quorum) throw this.noQuorum('inspect', answers);
    const holder = this.quorumHolder(views.map(([value]) => tokenOf(String(value))));
    const last = Math.max(...views.map(([, , counter]) => Number(counter)));
    if (holder === undefined) return { held: false, fence: last, holders: 0 };
    const copies = views.filter(([value]) => tokenOf(String(value)) === holder);
    const fences = copies.flatMap(([value]) => fenceOf(String(value)) ?? []);
    // Untagged copies only (a fencing round that failed half-way): the counters, never lower.
    const fence = fences.length > 0 ? Math.max(...fences) : last;
    // Copies expire one by one: the lock ends when the quorum-th longest-lived copy does.
    const lives = copies.map(([, pttl]) => Number(pttl)).sort((a, b) => b - a);
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
    const deleted = answers.flatMap((a) => (a.ok ? [tokenOf(a.value)] : []));
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
   * One-off upgrade sweep, as for a single Redis (`RedisLockBackend.sweepLegacyFences`), on
   * every node that answers: folds each per-key fence counter of versions before fence buckets
   * into its bucket and deletes it. Returns how many it folded; rejects on a node that fails
   * (run it again: folding is idempotent).
   */
  async sweepLegacyFences(): Promise<number> {
    let swept = 0;
    for (const node of this.#nodes) {
      const { client, connection } = node;
      if (!client.scan) throw new Error('the client cannot SCAN');
      let cursor = '0';
      do {
        const [next, found] = await connection.run(() =>
          client.scan!(cursor, 'MATCH', '{*}*:fence', 'COUNT', 1_000),
        );
        cursor = next;
        for (const name of found) {
          const fullKey = legacyFenceOwner(name);
          if (fullKey === undefined) continue;
          const names = redisLockNames(fullKey);
          swept += await this.fencedOn(node, async (count) =>
            Number(
              await connection.run(() =>
                runScript(
                  client,
                  CARRY_LEGACY,
                  [names.legacyFence, counterOf(names, count), FENCE_BUCKETS_META],
                  [count],
                ),
              ),
            ),
          );
        }
      } while (cursor !== '0');
    }
    return swept;
  }

  /**
   * Two rounds: draw the key's bucket counter on every node (INCR, after carrying over a
   * legacy per-key counter) and take the max over at least a quorum; then raise every node's
   * bucket to that max (tagging its copy of the lock with it) and count the grant only once a
   * quorum confirmed. Any later grant's draw reaches a quorum that intersects this one, and on
   * the common node the key's bucket is at least this fence, so its fence is higher (other keys
   * of the bucket only raise it further). Safe as long as nodes keep their data (AOF with
   * fsync); a node restarted empty can lower it.
   */
  private async fence(names: RedisLockNames, token: string): Promise<number> {
    const counts = await this.onEveryNode((client, node) =>
      this.fencedOn(node, (count) =>
        runScript(
          client,
          DRAW_FENCE,
          [counterOf(names, count), names.legacyFence, FENCE_BUCKETS_META],
          [count],
        ),
      ),
    );
    const values = counts.flatMap((c) => (c.ok ? [Number(c.value)] : []));
    if (values.length < this.quorum) throw this.noQuorum('fence (INCR)', counts);
    const max = Math.max(...values);
    const raised = await this.onEveryNode((client, node) =>
      this.fencedOn(node, (count) =>
        runScript(
          client,
          RAISE_FENCE,
          [counterOf(names, count), names.lock, FENCE_BUCKETS_META],
          [max, token, count],
        ),
      ),
    );
    if (raised.filter((r) => r.ok).length < this.quorum)
      throw this.noQuorum('fence (raise)', raised);
    return max;
  }

  /**
   * Runs a call that reads or draws a node's fences with its bucket count: the node's first
   * one moves it to the configured `fenceBuckets` (see `FenceBucketCount`).
   */
  private fencedOn<T>(node: QuorumNode, call: (count: number) => Promise<T>): Promise<T> {
    const exec = (
      script: Parameters<typeof runScript>[1],
      keys: readonly string[],
      args: readonly (string | number)[],
    ): Promise<unknown> => node.connection.run(() => runScript(node.client, script, keys, args));
    return this.#buckets.get(node)!.run(exec, call);
  }

  /** A node's answer for one request of a batch that failed on its own (one key's error). */
  private failedAnswer(node: string, err: Error): NodeAnswer<never> {
    const { message, cause } = this.failure(err);
    return { node, ok: false, refused: err.name === 'ReplyError', error: message, cause };
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

  private onEveryNode<T>(
    fn: (client: RedlockNode, node: QuorumNode) => Promise<T>,
  ): Promise<NodeAnswer<T>[]> {
    return this.onNodes(this.#nodes, fn);
  }

  /** Runs `fn` on each node, each bounded by `nodeTimeout`, a disconnected one failing at once. */
  private onNodes<T>(
    nodes: readonly QuorumNode[],
    fn: (client: RedlockNode, node: QuorumNode) => Promise<T>,
  ): Promise<NodeAnswer<T>[]> {
    return Promise.all(
      nodes.map(async (node): Promise<NodeAnswer<T>> => {
        const { client, connection, label } = node;
        try {
          const value = await withTimeout(
            connection.run(() => fn(client, node)),
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

/** A key's fence bucket counter on a node laid out for `count` buckets. */
function counterOf(names: RedisLockNames, count: number): string {
  return fenceCounterName(fenceBucket(names.slot, count));
}
