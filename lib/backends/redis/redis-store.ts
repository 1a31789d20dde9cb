import { Logger } from '@nestjs/common';
import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { FenceBucketCount } from './fence-bucket-count';
import { fenceBucket } from './fence-buckets';
import type { RedisPort, RedisScript } from './port/redis-port';
import { RedisConnection } from './redis-connection';
import type { RedisKeyspace, RedisLockNames } from './redis-keys';

/** A reply of a script that refused a key holding something this module did not write. */
const FOREIGN = /^FOREIGN (\S+)/;

/**
 * One Redis (a single node or a Cluster) as the backend's parts use it: its client port, the
 * connection state every call goes through (failing at once while the client is known to be
 * down), the node's fence bucket count (single node), and the module's names. A script's refusal
 * of a key this module did not write becomes a `LockBackendError` naming the key and its type.
 */
export class RedisStore {
  /** The client's connection state: every call goes through it. */
  readonly connection: RedisConnection;
  /** The node's fence bucket count; absent on a Cluster (one counter per hash slot). */
  readonly #buckets?: FenceBucketCount;
  // ES-private: util.inspect of a lock handle reaches the backend and its parts, and must not
  // print a client's options (its password).
  readonly #port: RedisPort;

  constructor(
    port: RedisPort,
    readonly keyspace: RedisKeyspace,
    /** The backend's name, as errors and log lines name it. */
    readonly backendName: string,
    readonly redactor: SecretRedactor,
    /** Whether the module made the client (it then logs every connection error). */
    ownsClient: boolean,
    /** Fence counters on a single node (`fenceBuckets`); not used on a Cluster. */
    fenceBuckets: number,
  ) {
    this.#port = port;
    this.connection = new RedisConnection(
      port,
      redactor,
      `redis backend "${backendName}"`,
      ownsClient ? 'always' : 'unhandled',
    );
    if (!port.cluster) {
      this.#buckets = new FenceBucketCount(keyspace, fenceBuckets, (message) =>
        new Logger('LockService').warn(`redis backend "${backendName}": ${message}`),
      );
    }
  }

  /** The client port (the wake-up channel makes its subscriber from it). */
  get port(): RedisPort {
    return this.#port;
  }

  /** Whether the client is a Cluster's (renewals then go per slot). */
  get cluster(): boolean {
    return this.#port.cluster;
  }

  /**
   * Runs a script of one lock key: KEYS are the first `keyCount` of the key's names (lock, queue,
   * its bucket's counter, the node's bucket-count key or on a Cluster the counter again, waiter
   * expiries, arrivals), ARGV are `args` and, unless `keyCount` is 2 (a script that draws and
   * reads no fence), the node's bucket count (0 on a Cluster). `onAbandoned` gets the call's own
   * promise when the connection dropped under it (a late reply to undo), with the bucket count
   * it was sent with.
   */
  keyScript(
    script: RedisScript,
    names: RedisLockNames,
    args: readonly (string | number)[],
    onAbandoned?: (late: Promise<unknown>, count: number | null) => void,
    keyCount = 6,
  ): Promise<unknown> {
    const buckets = this.#buckets;
    const count = buckets ? buckets.preparedCount : null;
    if (count === undefined) {
      // The node's bucket count is not known yet: read (and if need be, move) it first.
      return buckets!
        .run(
          (s, keys, argv) => this.run(s, keys, argv),
          (known) => this.send(script, names, args, known, keyCount, onAbandoned),
        )
        .catch((err: unknown) => {
          throw this.foreign(err, names.lock) ?? err;
        });
    }
    return this.send(script, names, args, count, keyCount, onAbandoned).catch((err: unknown) => {
      // Refused for another bucket count (an instance changed it since): once more with it.
      if (buckets?.followRefusal(err))
        return this.keyScript(script, names, args, onAbandoned, keyCount);
      throw this.foreign(err, names.lock) ?? err;
    });
  }

  /** One call of {@link keyScript} under bucket count `count`. */
  private send(
    script: RedisScript,
    names: RedisLockNames,
    args: readonly (string | number)[],
    count: number | null,
    keyCount: number,
    onAbandoned?: (late: Promise<unknown>, count: number | null) => void,
  ): Promise<unknown> {
    const keys = this.keysOf(names, count, keyCount);
    const argv = keyCount === 2 ? args : [...args, count ?? 0];
    return this.connection.run(
      () => this.#port.evalScript(script, keys, argv),
      onAbandoned && ((late) => onAbandoned(late, count)),
    );
  }

  /** A script on explicit KEYS and ARGV, through the connection. */
  run(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.connection.run(() => this.#port.evalScript(script, keys, args));
  }

  /** A script straight on the client, whatever the connection state (late clean-ups). */
  runRaw(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.#port.evalScript(script, keys, args);
  }

  /** Many calls of one script in one batch, through the connection (see `RedisPort.evalBatch`). */
  batch(script: RedisScript, calls: Parameters<RedisPort['evalBatch']>[1]): Promise<unknown[]> {
    return this.connection.run(() => this.#port.evalBatch(script, calls));
  }

  /** A plain command through the connection. */
  command(args: readonly string[], routeKey?: string): Promise<unknown> {
    return this.connection.run(() => this.#port.command(args, routeKey));
  }

  /**
   * The `LockBackendError` for a script's or a batch's "FOREIGN <type>" about Redis key `name`,
   * else undefined.
   */
  foreign(err: unknown, name: string): LockBackendError | undefined {
    const match = FOREIGN.exec(
      typeof err === 'string' ? err : ((err as Error | undefined)?.message ?? ''),
    );
    if (!match) return undefined;
    return new LockBackendError(
      this.backendName,
      `the Redis key "${this.redactor.text(name)}" holds a ${match[1]} this module did not ` +
        'write: refusing to use or overwrite it (remove it, or use another key or keyPrefix)',
    );
  }

  /**
   * The first `keyCount` KEYS of a key script for the node's bucket count (`null` on a Cluster,
   * whose scripts get the counter again for the bucket-count key: every key in the lock's slot).
   */
  keysOf(names: RedisLockNames, count: number | null, keyCount = 6): readonly string[] {
    let cached = names.scriptKeys;
    if (cached?.count !== count) {
      const counter = this.keyspace.counter(fenceBucket(names.slot, count));
      const meta = count === null ? counter : this.keyspace.bucketCountKey;
      const all = [names.lock, names.queue, counter, meta, names.waiters, names.arrivals];
      names.scriptKeys = cached = { count, all, lean: all.slice(0, 4), pair: all.slice(0, 2) };
    }
    return keyCount === 6 ? cached.all : keyCount === 4 ? cached.lean : cached.pair;
  }
}
