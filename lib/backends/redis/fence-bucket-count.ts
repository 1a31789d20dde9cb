import { MAX_FENCE_BUCKETS } from './fence-buckets';
import type { RedisScript } from './port/redis-port';
import type { RedisKeyspace } from './redis-keys';
import { MIGRATE_BUCKETS, READ_BUCKETS } from './scripts/buckets';

/** Runs one script on the node a {@link FenceBucketCount} stands for. */
export type NodeScriptRunner = (
  script: RedisScript,
  keys: readonly string[],
  args: readonly (string | number)[],
) => Promise<unknown>;

/** Attempts at moving a node to the configured count while other instances move it too. */
const MIGRATE_ATTEMPTS = 3;

/**
 * The fence bucket count of one node (a single Redis, or one Redlock node), as this instance
 * uses it. Before its first fenced call the node is moved to the configured `fenceBuckets`
 * (one read; a script raising the new counters above the old ones when the count changed), so
 * no grant ever draws from a layout the node's counters were not prepared for; a failure is
 * retried by the next call. Grant scripts refuse a count the node does not record
 * ("FENCEBUCKETS <n>": another instance started with another `fenceBuckets` since): this
 * instance then uses the node's count, with a warning, until it restarts.
 */
export class FenceBucketCount {
  private current: number;
  private prepared?: Promise<void>;
  /** The node was prepared: calls go straight to the store (no await on the hot path). */
  private ready = false;
  private readonly warned = new Set<number>();

  constructor(
    /** Names the node's counters and its bucket-count key. */
    private readonly keyspace: RedisKeyspace,
    private readonly configured: number,
    /** Logs a warning (already naming the backend and node). */
    private readonly warn: (message: string) => void,
  ) {
    this.current = configured;
  }

  /**
   * Runs `call` with the node's count once the node is prepared; a call refused for another
   * count runs once more with that count.
   */
  run<T>(exec: NodeScriptRunner, call: (count: number) => Promise<T>): Promise<T> {
    if (!this.ready) return this.runPrepared(exec, call);
    return call(this.current).catch((err: unknown) => this.retried(err, call));
  }

  /**
   * The node's count once it is prepared (the hot path calls with it directly, then
   * {@link followRefusal} on an error); undefined before.
   */
  get preparedCount(): number | undefined {
    return this.ready ? this.current : undefined;
  }

  /**
   * After a call made with {@link preparedCount} failed: `true` when the node refused it for
   * another count (which this instance now uses: call again), `false` for any other error.
   */
  followRefusal(err: unknown): boolean {
    const count = refusedFor(err);
    if (count === undefined) return false;
    this.adopt(count);
    return true;
  }

  /** {@link run} before the node was prepared: prepares it first (once; again after a failure). */
  private async runPrepared<T>(
    exec: NodeScriptRunner,
    call: (count: number) => Promise<T>,
  ): Promise<T> {
    await (this.prepared ??= this.prepare(exec).then(
      () => {
        this.ready = true;
      },
      (err: unknown) => {
        this.prepared = undefined;
        throw err;
      },
    ));
    return call(this.current).catch((err: unknown) => this.retried(err, call));
  }

  /** A call refused for another count ("FENCEBUCKETS <n>") runs once more with that count. */
  private retried<T>(err: unknown, call: (count: number) => Promise<T>): Promise<T> {
    const count = refusedFor(err);
    if (count === undefined) throw err;
    this.adopt(count);
    return call(this.current);
  }

  private async prepare(exec: NodeScriptRunner): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const { bucketCountKey } = this.keyspace;
      const have = checkedCount(await exec(READ_BUCKETS, [bucketCountKey], [this.configured]));
      if (have === this.configured) {
        this.current = have;
        return;
      }
      try {
        await exec(
          MIGRATE_BUCKETS,
          [
            bucketCountKey,
            ...this.keyspace.counters(have),
            ...this.keyspace.counters(this.configured),
          ],
          [have, this.configured],
        );
        this.current = this.configured;
        return;
      } catch (err) {
        if (refusedFor(err) === undefined || attempt >= MIGRATE_ATTEMPTS) throw err;
      }
    }
  }

  private adopt(count: number): void {
    checkedCount(count);
    this.current = count;
    if (this.warned.has(count)) return;
    this.warned.add(count);
    this.warn(
      `the store's fence counters are laid out for fenceBuckets ${count} (an instance started ` +
        `with it since), not the configured ${this.configured}: using ${count} until restart`,
    );
  }
}

/** The count of a "FENCEBUCKETS <n>" refusal, else undefined. */
export function refusedFor(err: unknown): number | undefined {
  const match = /^FENCEBUCKETS (\d+)/.exec(String((err as Error | undefined)?.message));
  return match ? Number(match[1]) : undefined;
}

/** A count read from the store, if it is one (the key could have been overwritten by hand). */
function checkedCount(value: unknown): number {
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > MAX_FENCE_BUCKETS) {
    throw new Error(`the bucket-count key holds ${String(value)}, not a fence bucket count`);
  }
  return count;
}
