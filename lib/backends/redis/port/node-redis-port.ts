import {
  evalBatchWith,
  evalScriptWith,
  fromNodeRedis,
  RESP2_SHAPES,
  type SendCommand,
} from './node-redis-commands';
import type {
  ConnectionEvents,
  ConnectionPort,
  RedisPort,
  RedisScript,
  ScriptCall,
  SubscriberPort,
} from './redis-port';

/** A listener of a client's events, as the structural types below take it. */
type Listener = (...args: never[]) => void;

/**
 * The part of a node-redis 4, 5 or 6 client (`createClient()`) the adapter uses, typed
 * structurally so the module compiles without `redis` installed (it is an optional peer).
 * Version differences the adapter relies on: 4 has `quit()`/`disconnect()`, 5 and 6 add
 * `close()`/`destroy()`; 6 speaks RESP3 unless `RESP: 2`, 5 only with `RESP: 3`.
 */
export interface NodeRedisClientLike {
  sendCommand(args: string[], options?: object): Promise<unknown>;
  /** Open: connecting, connected or reconnecting (`connect()` called, not closed, not given up). */
  readonly isOpen: boolean;
  /** Connected and through its handshake: commands are written at once. */
  readonly isReady: boolean;
  readonly options?: NodeRedisClientOptions;
  duplicate(overrides?: object): NodeRedisClientLike;
  connect(): Promise<unknown>;
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  on(event: string, listener: Listener): unknown;
  removeListener(event: string, listener: Listener): unknown;
  listenerCount(event: string): number;
  /** node-redis 5 and 6: QUIT without the command, once pending replies arrived. */
  close?(): Promise<unknown>;
  /** node-redis 5 and 6: drops the socket and stops reconnecting. */
  destroy?(): void;
  /** node-redis 4 (5 and 6: deprecated, as `close`). */
  quit?(): Promise<unknown>;
  /** node-redis 4 (5 and 6: deprecated, as `destroy`). */
  disconnect?(): Promise<unknown>;
  /** node-redis 4 with `legacyMode`: the promise API the callback one replaced. */
  readonly v4?: { sendCommand(args: string[], options?: object): Promise<unknown> };
}

/** The options of a node-redis client it keeps readable as `client.options` (URL parsed in). */
export interface NodeRedisClientOptions {
  readonly socket?: { readonly host?: string; readonly port?: number; readonly path?: string };
  readonly disableOfflineQueue?: boolean;
  /** node-redis 4: `sendCommand` is the callback API, the promise one is under `client.v4`. */
  readonly legacyMode?: boolean;
}

/** Whether `value` looks like a node-redis 4, 5 or 6 client (not a Cluster). */
export function isNodeRedisClient(value: unknown): value is NodeRedisClientLike {
  const c = value as Partial<NodeRedisClientLike> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.sendCommand === 'function' &&
    typeof c.duplicate === 'function' &&
    typeof c.connect === 'function' &&
    typeof c.isOpen === 'boolean' &&
    typeof c.isReady === 'boolean' &&
    typeof (c as { nodeClient?: unknown }).nodeClient !== 'function'
  );
}

/** How a port treats the client it wraps. */
export interface NodeRedisPortOptions {
  /**
   * Adds an error listener of the port's own now, before anything connects: node-redis throws an
   * 'error' event nobody listens to (a dropped connection then crashes the process, a refused
   * first connection stops it reconnecting). For clients the module makes; not counted as the
   * user's in `userErrorListeners()`.
   */
  readonly guard?: boolean;
}

/**
 * A node-redis connection's state, as {@link ConnectionPort} tells it. node-redis emits `error`
 * (isReady already false) then `reconnecting` when a connection drops, `error` then (after the
 * delay) `reconnecting` for each failed attempt, `ready` when through, `end` when closed by its
 * owner, and only `error` (isOpen already false) when its reconnect strategy gives up.
 */
class NodeRedisConnection implements ConnectionPort {
  readonly endpoint: string;
  private ownListeners = 0;

  constructor(
    protected readonly client: NodeRedisClientLike,
    readonly family: string,
    options: NodeRedisPortOptions,
  ) {
    this.endpoint = endpointOf(client.options);
    if (options.guard) {
      client.on('error', () => undefined);
      this.ownListeners++;
    }
  }

  isReady(): boolean {
    return this.client.isReady;
  }

  watch(events: ConnectionEvents): () => void {
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      events.ended();
    };
    const listeners: Array<[string, Listener]> = [
      [
        'ready',
        () => {
          ended = false;
          events.ready();
        },
      ],
      [
        'error',
        ((err: unknown) => {
          events.error(err);
          if (!this.client.isOpen) end(); // the reconnect strategy gave up
        }) as Listener,
      ],
      // Emitted also once more after a close that cut a reconnect delay short: not a drop then.
      ['reconnecting', () => this.client.isOpen && events.closed()],
      ['end', end],
    ];
    for (const [event, listener] of listeners) this.client.on(event, listener);
    this.ownListeners++;
    return () => {
      for (const [event, listener] of listeners) this.client.removeListener(event, listener);
      this.ownListeners--;
    };
  }

  userErrorListeners(): number {
    return this.client.listenerCount('error') - this.ownListeners;
  }

  async close(): Promise<void> {
    const { client } = this;
    // The graceful close waits for replies a down server never sends: only while ready.
    if (client.isReady) {
      try {
        await (client.close ? client.close() : client.quit?.());
      } catch {
        // fall through to the hard close
      }
    }
    if (!client.isOpen) return;
    try {
      await (client.destroy ? client.destroy() : client.disconnect?.());
    } catch {
      // already closed meanwhile
    }
  }
}

/** {@link RedisPort} over a node-redis 4, 5 or 6 client. */
export class NodeRedisPort extends NodeRedisConnection implements RedisPort {
  readonly cluster = false;
  readonly queuesOffline: boolean;
  private readonly send: SendCommand;

  /**
   * A client not connected yet (`connect()` not called) is not ready and its calls fail with
   * node-redis's "The client is closed"; `ready` comes once its owner connects it.
   */
  constructor(client: NodeRedisClientLike, options: NodeRedisPortOptions = {}) {
    super(client, 'node-redis', options);
    this.queuesOffline = client.options?.disableOfflineQueue !== true;
    const sender = client.options?.legacyMode ? client.v4! : client;
    this.send = (args) => sender.sendCommand(args, RESP2_SHAPES).catch(rethrowReply);
  }

  evalScript(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return evalScriptWith(this.send, script, keys, args);
  }

  evalBatch(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
    return evalBatchWith(this.send, script, calls);
  }

  command(args: readonly string[], _routeKey?: string): Promise<unknown> {
    return this.send([...args], undefined);
  }

  /**
   * A duplicate of the client (same options; node-redis 4's callback mode off), connecting in
   * the background; node-redis subscribes it again after each reconnect.
   */
  subscriber(): SubscriberPort {
    const duplicate = this.client.duplicate(
      this.client.options?.legacyMode ? { legacyMode: false } : undefined,
    );
    const subscriber = new NodeRedisSubscriber(duplicate, this.family, { guard: true });
    // Its errors reach the 'error' listeners; it rejects only once closed or given up.
    duplicate.connect().catch(() => undefined);
    return subscriber;
  }
}

/** A node-redis connection in subscriber mode. */
class NodeRedisSubscriber extends NodeRedisConnection implements SubscriberPort {
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<void> {
    await this.client.subscribe(channel, (message) => onMessage(message)).catch(rethrowReply);
  }
}

function rethrowReply(err: unknown): never {
  throw fromNodeRedis(err);
}

/** `host:port` or the socket path of a node-redis client's options (its defaults otherwise). */
function endpointOf(options: NodeRedisClientOptions | undefined): string {
  const socket = options?.socket;
  if (socket?.path) return socket.path;
  return `${socket?.host ?? 'localhost'}:${socket?.port ?? 6379}`;
}
