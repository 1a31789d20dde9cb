import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { fenceBucket } from './fence-buckets';
import type { RedisPort, RedisScript } from './port/redis-port';
import { RedisConnection } from './redis-connection';
import type { RedisKeyspace, RedisLockNames } from './redis-keys';

/** A reply of a script that refused a key holding something this module did not write. */
const FOREIGN = /^FOREIGN (\S+)/;

/**
 * One Redis (a single node or a Cluster) as the backend's parts use it: its client port, the
 * connection state every call goes through (failing at once while the client is known to be
 * down), the fence bucket count, and the module's names. A script's refusal of a key this module
 * did not write becomes a `LockBackendError` naming the key and its type.
 */
export class RedisStore {
  /** The client's connection state: every call goes through it. */
  readonly connection: RedisConnection;
  /** Fence counters on a single node; `null` on a Cluster (one counter per hash slot). */
  private readonly buckets: number | null;
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
    this.buckets = port.cluster ? null : fenceBuckets;
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
   * Runs a script of one lock key: KEYS are the first `keyCount` (5, 3 or 1) of the key's names
   * (lock, queue, its bucket's counter, waiter expiries, arrivals), ARGV are `args`. `onAbandoned` gets the
   * call's own promise when the connection dropped under it (a late reply to undo).
   */
  keyScript(
    script: RedisScript,
    names: RedisLockNames,
    args: readonly (string | number)[],
    onAbandoned?: (late: Promise<unknown>) => void,
    keyCount = 5,
  ): Promise<unknown> {
    const keys = this.keysOf(names, keyCount);
    return this.connection.run(
      () => this.#port.evalScript(script, keys, args),
      onAbandoned,
      (err) => this.foreign(err, names.lock) ?? err,
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

  /** The first `keyCount` KEYS of a key script (5, 3 or 1), made once per lock name. */
  keysOf(names: RedisLockNames, keyCount = 5): readonly string[] {
    let cached = names.scriptKeys;
    if (cached?.count !== this.buckets) {
      const counter = this.keyspace.counter(fenceBucket(names.slot, this.buckets));
      const all = [names.lock, names.queue, counter, names.waiters, names.arrivals];
      names.scriptKeys = cached = {
        count: this.buckets,
        all,
        lean: all.slice(0, 3),
        lock: all.slice(0, 1),
      };
    }
    return keyCount === 5 ? cached.all : keyCount === 3 ? cached.lean : cached.lock;
  }
}
