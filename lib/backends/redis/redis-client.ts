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
