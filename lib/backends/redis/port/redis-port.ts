import { createHash } from 'node:crypto';

/**
 * The Redis client port: everything the Redis and Redlock backends ask of a client, whatever
 * library it comes from (ioredis 5 and 6, iovalkey, node-redis 4 to 6, single node or Cluster).
 * One adapter per client family implements it (`ioredis-port.ts`, `node-redis-port.ts`, ...);
 * nothing above this file knows which library runs. Replies keep RESP2 shapes: integers as
 * numbers, bulk strings as strings, nil as `null`, arrays as arrays.
 */
export interface RedisPort extends ConnectionPort {
  /** `true` on a Cluster client: scripts are routed by the slot of their first key. */
  readonly cluster: boolean;

  /**
   * EVALSHA, loading the script with EVAL when the node answers NOSCRIPT. On a Cluster, routed to
   * the node serving the slot of `keys[0]` (every key of one call shares that slot). A reply
   * error rejects with a {@link RedisReplyError}; a connection failure with the client's error.
   */
  evalScript(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown>;

  /**
   * Many calls of one script, sent together without waiting for each other (one write per node,
   * where the client can), each routed as {@link evalScript} routes it; calls the node answered
   * NOSCRIPT to are sent again with the source. One result per call, in order: its reply, or the
   * Error that call got (a {@link RedisReplyError} for a reply error). Rejects only when the batch
   * as a whole could not be sent.
   */
  evalBatch(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]>;

  /**
   * One plain command (`EXISTS`, `PING`, `INFO`...), as its RESP2 reply (a verbatim string as a
   * plain string). On a Cluster, routed by `routeKey` (any node without one).
   */
  command(args: readonly string[], routeKey?: string): Promise<unknown>;

  /**
   * Whether the client queues commands while it is disconnected (ioredis `enableOfflineQueue`,
   * node-redis `disableOfflineQueue`), when the client says; `undefined` when it cannot tell.
   * A quorum must hear at once from a dead node, so Redlock refuses a client that queues.
   */
  readonly queuesOffline: boolean | undefined;

  /**
   * A connection of its own for SUBSCRIBE (a subscribed connection carries nothing else), made
   * now and connecting in the background; `close()` ends it, whoever made this port's client.
   */
  subscriber(): SubscriberPort;
}

/** A connection in subscriber mode (see {@link RedisPort.subscriber}). */
export interface SubscriberPort extends ConnectionPort {
  /**
   * Subscribes `channel`, resolving once the server confirmed it; `onMessage` gets each message
   * published there. The subscription is renewed by the adapter after a reconnect.
   */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<void>;
}

/** One connection (or a Cluster's connections) and what can be known of its state. */
export interface ConnectionPort {
  /** The client library, for messages: `ioredis`, `iovalkey`, `node-redis`. */
  readonly family: string;
  /**
   * Where it connects, for messages: `host:port`, a socket path, or `cluster <seeds>`. Not
   * redacted: a seed may be a URL with a password (callers redact).
   */
  readonly endpoint: string;

  /** Able to carry a command now (connected, authenticated, selected). */
  isReady(): boolean;

  /**
   * Sends the connection's state changes to `events` from now on; returns the function that
   * stops it. A client the user passed in outlives the backend, so every listener is removed.
   */
  watch(events: ConnectionEvents): () => void;

  /**
   * How many listeners of the client's own error event the user added (not ours): while none,
   * the backend logs the client's connection errors (the library would print them raw, or throw).
   */
  userErrorListeners(): number;

  /**
   * Ends the connection: QUIT when connected (pending replies arrive first), else a hard
   * disconnect that also stops reconnecting. Only for clients the module made.
   */
  close(): Promise<void>;
}

/** State changes of a connection, in one vocabulary for every client library. */
export interface ConnectionEvents {
  /** Ready to carry commands (again). */
  ready(): void;
  /**
   * The client reported an error: a connection error (`ECONNREFUSED`, `WRONGPASS` during the
   * handshake, a Cluster that reached no node), or with `nodeOnly` one node's error of a Cluster
   * (a reason kept for the close that may follow, never by itself a sign that the whole client is
   * down). Whether it took the connection down is told by {@link closed} and by `isReady()`.
   */
  error(err: unknown, nodeOnly?: boolean): void;
  /** The connection closed and the client will try again. */
  closed(): void;
  /** The client gave up for good (closed by its owner, or out of retries). */
  ended(): void;
}

/** One script call of a batch: its KEYS and ARGV. */
export interface ScriptCall {
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

/** A Lua script with its SHA1, for EVALSHA with an EVAL fallback. */
export interface RedisScript {
  readonly source: string;
  readonly sha: string;
}

/** A script with its SHA1. */
export function script(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * The server answered a command with an error (`WRONGTYPE`, `NOSCRIPT`, `NOPERM`, an error a
 * script raised): the node is up and refused. Every adapter rejects with this class for a reply
 * error, so callers tell a refusal from a connection failure the same way on every client.
 */
export class RedisReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
  }
}

/** Whether `err` is a reply error of the server (see {@link RedisReplyError}). */
export function isReplyError(err: unknown): err is Error {
  return err instanceof RedisReplyError || (err instanceof Error && err.name === 'ReplyError');
}

/** Whether `err` is the server's NOSCRIPT (the node has not seen the script since it started). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
