import type { RedisScript } from './redis-scripts';

/**
 * The part of an ioredis `Redis` or `Cluster` the backend uses. Typed structurally so the
 * backend compiles without ioredis installed (it is an optional peer).
 */
export interface RedisLikeClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  pttl(key: string): Promise<number>;
  exists(...keys: string[]): Promise<number>;
  ping(): Promise<string>;
  duplicate(): RedisLikeClient;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: ConnectionEvent, listener: (err?: Error) => void): unknown;
  removeListener(event: ConnectionEvent, listener: (err?: Error) => void): unknown;
  /** How many listeners `event` has (ioredis's EventEmitter). */
  listenerCount?(event: string): number;
  quit(): Promise<unknown>;
  disconnect(): void;
  /** ioredis's connection state: `wait`, `connecting`, `connect`, `ready`, `reconnecting`, `close`, `end`. */
  status?: string;
  /** ioredis options of a `Redis` (`host`, `port`, `path`), read to name the endpoint. */
  options?: { host?: string; port?: number; path?: string };
  /** A Cluster's startup nodes, read to name the endpoint. */
  startupNodes?: ReadonlyArray<string | { host?: string; port?: number }>;
  /** `true` on an ioredis `Cluster` (one fence counter per hash slot, single-slot scripts). */
  isCluster?: boolean;
  /** A Cluster's slot table: `slots[slot][0]` is the `host:port` of the slot's master. */
  slots?: ReadonlyArray<readonly string[] | undefined>;
  /** Commands sent in one write, answered in one read (batched renewals). */
  pipeline?(): RedisPipelineLike;
  /** A Cluster's node clients (`'master'`: one per master), for node-wide scans. */
  nodes?(role: 'master'): RedisLikeClient[];
  /** SCAN (the legacy fence sweep). */
  scan?(cursor: string, ...args: (string | number)[]): Promise<[string, string[]]>;
}

/** The part of an ioredis pipeline used for batched script calls. */
export interface RedisPipelineLike {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): RedisPipelineLike;
  eval(script: string, numKeys: number, ...args: (string | number)[]): RedisPipelineLike;
  /** One `[error, reply]` per command, in order. */
  exec(): Promise<Array<[Error | null, unknown]> | null>;
}

/** One script call of a batch: its KEYS and ARGV. */
export interface ScriptCall {
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

/**
 * Connection events of an ioredis `Redis` or `Cluster` that say whether it can carry a
 * command: `error` (with the error) and `node error` (a Cluster node's, with the error) carry the
 * reason; the others mark the state changes.
 */
export type ConnectionEvent = 'ready' | 'error' | 'node error' | 'close' | 'end';

/** EVALSHA, loading the script with EVAL the first time a node has not seen it. */
export async function runScript(
  client: RedisLikeClient,
  script: RedisScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!String((err as Error)?.message).startsWith('NOSCRIPT')) throw err;
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}

/**
 * Runs `calls` of one script in one pipeline (one write, one read), EVALSHA first, then the
 * calls a node answered NOSCRIPT to (it had not seen the script) again with EVAL in a second
 * one. One result per call: its reply, or the Error that call got. Rejects when the pipeline as
 * a whole failed (the connection, a Cluster that cannot route it). Without `pipeline()` on the
 * client, the calls are sent together without waiting for each other's replies.
 */
export async function runScriptBatch(
  client: RedisLikeClient,
  script: RedisScript,
  calls: readonly ScriptCall[],
): Promise<Array<unknown>> {
  if (!client.pipeline) {
    return Promise.all(
      calls.map((c) =>
        runScript(client, script, c.keys, c.args).catch((err: unknown) => toError(err)),
      ),
    );
  }
  const send = async (
    batch: readonly ScriptCall[],
    withSource: boolean,
  ): Promise<Array<[Error | null, unknown]>> => {
    const pipeline = client.pipeline!();
    for (const { keys, args } of batch) {
      if (withSource) pipeline.eval(script.source, keys.length, ...keys, ...args);
      else pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
    }
    return (await pipeline.exec()) ?? batch.map(() => [new Error('pipeline discarded'), null]);
  };
  const replies: Array<[Error | null, unknown]> = await send(calls, false);
  const unknown = replies.flatMap(([err], i) =>
    err && String(err.message).startsWith('NOSCRIPT') ? [i] : [],
  );
  if (unknown.length > 0) {
    const again = await send(
      unknown.map((i) => calls[i]),
      true,
    );
    unknown.forEach((i, j) => (replies[i] = again[j]));
  }
  return replies.map(([err, reply]) => (err ? err : reply));
}

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * Closes a client: QUIT when connected (pending replies arrive first), else a hard disconnect,
 * which also cancels a scheduled reconnect that QUIT would leave running.
 */
export async function closeClient(client: RedisLikeClient): Promise<void> {
  if (client.status === 'ready') {
    try {
      await client.quit();
    } catch {
      // fall through to disconnect
    }
  }
  if (client.status !== 'end') client.disconnect();
}
