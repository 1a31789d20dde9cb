import { Logger } from '@nestjs/common';
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
  on(event: 'error', listener: (err: Error) => void): unknown;
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

/** Repeats of one connection error logged at most this often. */
const ERROR_LOG_INTERVAL_MS = 30_000;

/**
 * Routes a created client's connection errors to the Nest logger (warn), one line per distinct
 * message per 30 s, instead of ioredis's "Unhandled error event" on stderr for every retry.
 * Operations still fail with `LockBackendError` on their own.
 */
export function logConnectionErrors(client: RedisLikeClient, label: string): void {
  const logger = new Logger('LockService');
  const lastLogged = new Map<string, number>();
  client.on('error', (err: Error) => {
    const now = Date.now();
    const message = err?.message ?? String(err);
    if (now - (lastLogged.get(message) ?? -Infinity) < ERROR_LOG_INTERVAL_MS) return;
    lastLogged.set(message, now);
    logger.warn(`${label}: ${message}`);
  });
}
