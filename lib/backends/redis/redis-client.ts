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
  duplicate(): RedisLikeClient;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  quit(): Promise<unknown>;
  disconnect(): void;
  status?: string;
}

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

/** Closes a client politely, falling back to a hard disconnect if QUIT cannot be sent. */
export async function closeClient(client: RedisLikeClient): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}
