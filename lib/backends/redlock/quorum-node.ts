import type { SecretRedactor } from '../../core/contract/backend-factory';
import { fenceBucket } from '../redis/fence-buckets';
import type { RedisPort, RedisScript, ScriptCall } from '../redis/port/redis-port';
import { RedisConnection } from '../redis/redis-connection';
import type { RedisKeyspace, RedisLockNames } from '../redis/redis-keys';
import { RestartGuard } from '../redis/restart-guard';

/**
 * One independent Redis node of a Redlock set: its client port, its connection state (a node
 * known to be down is counted out at once, with its reason), its restart guard, and the name
 * messages give it (`host:port`).
 */
export class QuorumNode {
  /** `host:port`, redacted. */
  readonly label: string;
  readonly connection: RedisConnection;
  /** Whether the node has been up long enough for its vote to count (see `RestartGuard`). */
  readonly guard: RestartGuard;
  // ES-private: util.inspect of a lock handle reaches the backend, and must not print a
  // client's options (its password).
  readonly #port: RedisPort;

  constructor(
    port: RedisPort,
    private readonly keyspace: RedisKeyspace,
    backendName: string,
    redactor: SecretRedactor,
    /** Whether the module made the client (it then logs every connection error). */
    ownsClient: boolean,
    /** Fence counters kept on the node (`fenceBuckets`). */
    private readonly fenceBuckets: number,
    /** The node's restart guard, ms (`false`: none). */
    restartGuardMs: number | false,
  ) {
    this.#port = port;
    this.label = redactor.text(port.endpoint);
    this.connection = new RedisConnection(
      port,
      redactor,
      `redlock backend "${backendName}" node ${this.label}`,
      ownsClient ? 'always' : 'unhandled',
    );
    this.guard = new RestartGuard(
      this.connection,
      (args) => this.command(args),
      restartGuardMs,
      `redlock backend "${backendName}" node ${this.label}`,
    );
  }

  /** Whether the client queues commands while disconnected (a quorum must not wait on it). */
  get queuesOffline(): boolean | undefined {
    return this.#port.queuesOffline;
  }

  /** A script through the connection. */
  run(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.connection.run(() => this.#port.evalScript(script, keys, args));
  }

  /** Many calls of one script in one batch, through the connection. */
  batch(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
    return this.connection.run(() => this.#port.evalBatch(script, calls));
  }

  /** A plain command through the connection (PING, INFO). */
  command(args: readonly string[]): Promise<unknown> {
    return this.connection.run(() => this.#port.command(args));
  }

  /**
   * A script on a lock's copy and its fence bucket counter: KEYS `[lock, counter]`, or
   * `[counter, lock]` with `counterFirst`.
   */
  fenced(
    script: RedisScript,
    names: RedisLockNames,
    counterFirst: boolean,
    args: readonly (string | number)[],
  ): Promise<unknown> {
    const counter = this.keyspace.counter(fenceBucket(names.slot, this.fenceBuckets));
    return this.run(script, counterFirst ? [counter, names.lock] : [names.lock, counter], args);
  }

  /** Ends the client (only for clients the module made) and stops watching it. */
  async close(ownsClient: boolean): Promise<void> {
    if (ownsClient) await this.#port.close();
    this.connection.detach();
  }
}
