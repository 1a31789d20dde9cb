import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { withTimeout } from '../../core/shared/timers';
import { isReplyError } from '../redis/port/redis-port';
import { RedisNotConnectedError } from '../redis/redis-connection';
import type { QuorumNode } from './quorum-node';

/** What one node answered to one round. */
export type NodeAnswer<T> =
  | { readonly node: QuorumNode; readonly ok: true; readonly value: T }
  | {
      readonly node: QuorumNode;
      readonly ok: false;
      /** The node answered, with an error (`WRONGTYPE`, `NOPERM`...): reachable, but it refused. */
      readonly refused: boolean;
      /** What went wrong, redacted. */
      readonly error: string;
      readonly cause: unknown;
    };

/**
 * The nodes of a Redlock set and the rules every round shares: a round asks every node at once,
 * each bounded by `nodeTimeout` (a node known to be down fails at once), and counts answers
 * against the majority; a round short of it fails with a `LockBackendError` that says what each
 * node answered.
 */
export class Quorum {
  /** Nodes that must agree: a majority. */
  readonly size: number;

  constructor(
    readonly nodes: readonly QuorumNode[],
    private readonly backendName: string,
    private readonly redactor: SecretRedactor,
    /** Bound on each node's answer, ms. */
    private readonly nodeTimeout: number,
  ) {
    this.size = Math.floor(nodes.length / 2) + 1;
  }

  /** Runs `fn` on every node at once; one answer per node, in node order. */
  onEvery<T>(fn: (node: QuorumNode) => Promise<T>): Promise<NodeAnswer<T>[]> {
    return this.onNodes(this.nodes, fn);
  }

  /** Runs `fn` on each of `nodes`, each bounded by `nodeTimeout`. */
  onNodes<T>(
    nodes: readonly QuorumNode[],
    fn: (node: QuorumNode) => Promise<T>,
  ): Promise<NodeAnswer<T>[]> {
    return Promise.all(
      nodes.map(async (node): Promise<NodeAnswer<T>> => {
        try {
          return { node, ok: true, value: await withTimeout(fn(node), this.nodeTimeout) };
        } catch (err) {
          return this.failed(node, err);
        }
      }),
    );
  }

  /** A node's failed answer (also for one key of a batch that failed on its own). */
  failed(node: QuorumNode, err: unknown): NodeAnswer<never> {
    const cause = err instanceof RedisNotConnectedError ? err.cause : err;
    return {
      node,
      ok: false,
      refused: isReplyError(err),
      error: this.redactor.message(cause),
      cause,
    };
  }

  /** How many answered without an error. */
  answered(answers: ReadonlyArray<NodeAnswer<unknown>>): number {
    return answers.filter((a) => a.ok).length;
  }

  /**
   * Fails at once, without asking any node, when fewer than a quorum of clients are connected:
   * the reasons are already known (`ECONNREFUSED`, a closed connection...).
   */
  require(op: string): void {
    const down = this.nodes.filter((node) => node.connection.isDown());
    if (this.nodes.length - down.length >= this.size) return;
    const answers = down.map((node) => this.failed(node, node.connection.error()));
    throw this.noQuorum(
      op,
      answers,
      `${this.nodes.length - down.length} of ${this.nodes.length} nodes connected`,
    );
  }

  /** The `LockBackendError` of a round short of a quorum: see {@link failure}. */
  noQuorum(
    op: string,
    answers: ReadonlyArray<NodeAnswer<unknown>>,
    count?: string,
  ): LockBackendError {
    const firstFailure = answers.find((a) => !a.ok);
    return new LockBackendError(this.backendName, this.failure(op, answers, count), {
      cause: firstFailure && !firstFailure.ok ? this.redactor.error(firstFailure.cause) : undefined,
    });
  }

  /**
   * "acquire: no quorum, 1 of 3 nodes answered (need 2); 10.0.0.2:6379: connect ECONNREFUSED
   * 10.0.0.2:6379; 10.0.0.3:6379 answered WRONGTYPE ...": what each failing node said.
   */
  failure(op: string, answers: ReadonlyArray<NodeAnswer<unknown>>, count?: string): string {
    const said = answers.flatMap((a) =>
      a.ok
        ? []
        : [a.refused ? `${a.node.label} answered ${a.error}` : `${a.node.label}: ${a.error}`],
    );
    const refusals = answers.some((a) => !a.ok && a.refused) ? ' without an error' : '';
    const counted =
      count ?? `${this.answered(answers)} of ${this.nodes.length} nodes answered${refusals}`;
    return `${op}: no quorum, ${counted} (need ${this.size}); ${said.join('; ')}`;
  }

  /** The token a quorum of `tokens` agree on ('' = no copy), if any. */
  holder(tokens: readonly string[]): string | undefined {
    const counts = new Map<string, number>();
    for (const token of tokens) if (token) counts.set(token, (counts.get(token) ?? 0) + 1);
    for (const [token, count] of counts) if (count >= this.size) return token;
    return undefined;
  }
}
