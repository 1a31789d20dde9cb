import { keySlot } from './key-slot';
import { isError, toError } from './port-errors';
import {
  isNoScript,
  isReplyError,
  RedisReplyError,
  type ConnectionEvents,
  type ConnectionPort,
  type RedisPort,
  type RedisScript,
  type ScriptCall,
  type SubscriberPort,
} from './redis-port';

/**
 * The part of an ioredis 5 or 6 (or iovalkey) `Redis` or `Cluster` the adapter uses, typed
 * structurally so the module compiles without any client installed (they are optional peers).
 */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  duplicate(): IoRedisLike;
  subscribe(...channels: string[]): Promise<unknown>;
  pipeline(): IoPipelineLike;
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
  listenerCount(event: string): number;
  quit(): Promise<unknown>;
  disconnect(): void;
  /** `wait`, `connecting`, `connect`, `ready`, `reconnecting`, `close`, `end`. */
  readonly status: string;
  /** A `Redis`'s options (`host`, `port`, `path`, `enableOfflineQueue`). */
  readonly options?: { host?: string; port?: number; path?: string; enableOfflineQueue?: boolean };
  /** `true` on a `Cluster`. */
  readonly isCluster?: boolean;
  /** A Cluster's startup nodes. */
  readonly startupNodes?: ReadonlyArray<string | { host?: string; port?: number }>;
  /** A Cluster's slot table: `slots[slot]` lists the `host:port` of the slot's nodes. */
  readonly slots?: ReadonlyArray<readonly string[] | undefined>;
}

/** The part of an ioredis pipeline used for batched script calls. */
interface IoPipelineLike {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): IoPipelineLike;
  eval(source: string, numKeys: number, ...args: (string | number)[]): IoPipelineLike;
  exec(): Promise<Array<[Error | null, unknown]> | null>;
}

/** Whether `value` looks like an ioredis (or iovalkey) `Redis` or `Cluster`. */
export function isIoRedisLike(value: unknown): value is IoRedisLike {
  const c = value as Partial<IoRedisLike> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.evalsha === 'function' &&
    typeof c.duplicate === 'function' &&
    typeof c.pipeline === 'function' &&
    typeof c.status === 'string'
  );
}

/** An ioredis 5 or 6 (or iovalkey) connection's state, as {@link ConnectionPort} tells it. */
class IoConnection implements ConnectionPort {
  readonly endpoint: string;
  private ownListeners = 0;
  /** Each watch's `ended`, for close() (see there). */
  private readonly enders = new Set<() => void>();

  constructor(
    protected readonly client: IoRedisLike,
    readonly family: string,
  ) {
    this.endpoint = endpointOf(client);
  }

  isReady(): boolean {
    return this.client.status === 'ready';
  }

  watch(events: ConnectionEvents): () => void {
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      events.ended();
    };
    const listeners: Array<[string, (...args: never[]) => void]> = [
      [
        'ready',
        () => {
          ended = false;
          events.ready();
        },
      ],
      ['error', (err: unknown) => events.error(clusterFailure(err) ?? err)],
      ['node error', (err: unknown) => events.error(err, true)],
      ['close', () => events.closed()],
      ['end', end],
    ];
    for (const [event, listener] of listeners) this.client.on(event, listener);
    this.enders.add(end);
    this.ownListeners++;
    return () => {
      for (const [event, listener] of listeners) this.client.removeListener(event, listener);
      this.enders.delete(end);
      this.ownListeners--;
    };
  }

  userErrorListeners(): number {
    return this.client.listenerCount('error') - this.ownListeners;
  }

  async close(): Promise<void> {
    if (this.client.status === 'ready') {
      try {
        await this.client.quit();
      } catch {
        // fall through to disconnect
      }
    }
    // Between two connection attempts there is no socket whose closing ends the client: then
    // ioredis never emits 'end' and stays 'reconnecting' (a Cluster 'disconnecting').
    const between = this.client.status === 'reconnecting' || this.client.status === 'close';
    // A hard disconnect also cancels a scheduled reconnect that QUIT would leave running.
    if (this.client.status !== 'end') this.client.disconnect();
    if (between) for (const end of [...this.enders]) end();
  }
}

/** {@link RedisPort} over an ioredis 5 or 6 (or iovalkey) `Redis` or `Cluster`. */
export class IoRedisPort extends IoConnection implements RedisPort {
  readonly cluster: boolean;
  readonly queuesOffline: boolean | undefined;

  constructor(client: IoRedisLike, family = 'ioredis') {
    super(client, family);
    this.cluster = client.isCluster === true;
    const options = (client as { options?: { enableOfflineQueue?: unknown } }).options;
    this.queuesOffline = options?.enableOfflineQueue !== false;
  }

  evalScript(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    const { client } = this;
    // One handler for both (every promise more is a share of the uncontended cycle).
    return client.evalsha(script.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (!isNoScript(err)) throw fromIoRedis(err);
      return client.eval(script.source, keys.length, ...keys, ...args).catch(rethrowReply);
    });
  }

  async evalBatch(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
    const results = this.cluster
      ? await this.pipelinedByNode(script, calls)
      : await this.pipelined(script, calls);
    // Not one reply from any node: the batch as a whole could not be sent.
    if (results.length > 0 && results.every((r) => isError(r) && !isReplyError(r))) {
      throw results[0];
    }
    return results;
  }

  command(args: readonly string[], _routeKey?: string): Promise<unknown> {
    // ioredis routes a Cluster command by the key its command table names (EXISTS: the key).
    return this.client.call(args[0], ...args.slice(1)).then(plainReply, rethrowReply);
  }

  subscriber(): SubscriberPort {
    return new IoSubscriber(this.client.duplicate(), this.family);
  }

  /** A Cluster pipeline must stay on one node: one pipeline per node, by the slot table. */
  private async pipelinedByNode(
    script: RedisScript,
    calls: readonly ScriptCall[],
  ): Promise<unknown[]> {
    const byNode = new Map<string, number[]>();
    calls.forEach((call, i) => {
      const slot = keySlot(call.keys[0]);
      const node = this.client.slots?.[slot]?.join(',') ?? `slot ${slot}`;
      const onNode = byNode.get(node);
      if (onNode) onNode.push(i);
      else byNode.set(node, [i]);
    });
    const results = new Array<unknown>(calls.length);
    await Promise.all(
      [...byNode.values()].map(async (indices) => {
        try {
          const replies = await this.pipelined(
            script,
            indices.map((i) => calls[i]),
          );
          indices.forEach((i, j) => (results[i] = replies[j]));
        } catch (err) {
          for (const i of indices) results[i] = toError(fromIoRedis(err));
        }
      }),
    );
    return results;
  }

  /**
   * One pipeline (one write, one read): EVALSHA first, then the calls a node answered NOSCRIPT
   * to again with EVAL in a second one.
   */
  private async pipelined(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
    const send = async (
      batch: readonly ScriptCall[],
      withSource: boolean,
    ): Promise<Array<[Error | null, unknown]>> => {
      const pipeline = this.client.pipeline();
      for (const { keys, args } of batch) {
        if (withSource) pipeline.eval(script.source, keys.length, ...keys, ...args);
        else pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
      }
      return (await pipeline.exec()) ?? batch.map(() => [new Error('pipeline discarded'), null]);
    };
    const replies = await send(calls, false);
    const unknown = replies.flatMap(([err], i) => (isNoScript(err) ? [i] : []));
    if (unknown.length > 0) {
      const again = await send(
        unknown.map((i) => calls[i]),
        true,
      );
      unknown.forEach((i, j) => (replies[i] = again[j]));
    }
    return replies.map(([err, reply]) => (err ? fromIoRedis(err) : reply));
  }
}

/** A duplicate of an ioredis client in subscriber mode (ioredis subscribes again on reconnect). */
class IoSubscriber extends IoConnection implements SubscriberPort {
  private readonly handlers = new Map<string, (message: string) => void>();

  constructor(client: IoRedisLike, family: string) {
    super(client, family);
    client.on('message', ((channel: string, message: string) =>
      this.handlers.get(channel)?.(message)) as (...args: never[]) => void);
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<void> {
    this.handlers.set(channel, onMessage);
    await this.client.subscribe(channel).catch(rethrowReply);
  }
}

/**
 * How messages name a client's server: `host:port` or the socket path of a `Redis`, the seeds of
 * a `Cluster` (`cluster 10.0.0.1:6379, ...`). Not redacted: a seed may be a URL with a password.
 */
function endpointOf(client: IoRedisLike): string {
  if (client.startupNodes) {
    const seeds = client.startupNodes.map((node) =>
      typeof node === 'string' ? node : `${node.host ?? '127.0.0.1'}:${node.port ?? 6379}`,
    );
    return `cluster ${seeds.join(', ')}`;
  }
  const { host, port, path } = client.options ?? {};
  return path ?? `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/** Fields of a client error that say what failed (no data). */
const WHAT_FAILED = ['code', 'errno', 'syscall', 'address', 'port'] as const;

/**
 * A Cluster that reached none of its nodes says only "Failed to refresh slots cache."; the last
 * node's error says why (`WRONGPASS ...`, or "Connection is closed." when nothing listens: the
 * connection that saw `ECONNREFUSED` is one ioredis keeps to itself).
 */
function clusterFailure(err: unknown): Error | undefined {
  const last = (err as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  if (last === undefined || last === null) return undefined;
  const failure = new Error(
    `no node of the cluster answered (last: ${(last as { message?: unknown }).message})`,
    { cause: last },
  );
  for (const field of WHAT_FAILED) {
    (failure as unknown as Record<string, unknown>)[field] = (last as Record<string, unknown>)[
      field
    ];
  }
  return failure;
}

/** A reply as a plain value: RESP3 verbatim strings (INFO) as their text. */
function plainReply(reply: unknown): unknown {
  return typeof reply === 'object' && reply !== null && !Array.isArray(reply)
    ? String(reply)
    : reply;
}

/**
 * An ioredis reply error (redis-errors' `ReplyError`, which also carries the command's arguments)
 * as a {@link RedisReplyError} with the server's message; any other error as it is.
 */
function fromIoRedis(err: unknown): unknown {
  return isError(err) && err.name === 'ReplyError' && !(err instanceof RedisReplyError)
    ? new RedisReplyError(err.message)
    : err;
}

function rethrowReply(err: unknown): never {
  throw fromIoRedis(err);
}
