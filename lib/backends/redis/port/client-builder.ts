import { loadOptionalPackage } from '../../../core/shared/optional-package';
import { IoRedisPort, type IoRedisLike } from './ioredis-port';
import type { RedisPort } from './redis-port';

/** A client library the module can make its clients with. */
export type RedisDriver = 'ioredis' | 'redis' | 'iovalkey';

/** Shape of the ioredis module we need (an optional peer, loaded on first use). */
interface IoRedisModule {
  Redis: new (url: string, options?: object) => IoRedisLike;
  Cluster: new (nodes: string[], options?: object) => IoRedisLike;
}

/** What a client the module makes is for, and how it is configured. */
export interface BuildOptions {
  /** The option field errors name (`backends.main`). */
  readonly field: string;
  /** What needs the library, for a missing package's message (`the redis backend`). */
  readonly usedFor: string;
  /** The library to use (default: the first installed of ioredis, redis, iovalkey). */
  readonly driver?: RedisDriver;
  /** The library's own client options, passed through. */
  readonly options?: Record<string, unknown>;
}

/** A client of one node at `url`, made by the module (it connects in the background). */
export async function buildClient(url: string, build: BuildOptions): Promise<RedisPort> {
  const { Redis } = await loadIoRedis(build);
  // disconnectTimeout: a dead server's socket never closes; do not hold the exit 2 s for it.
  return new IoRedisPort(new Redis(url, { disconnectTimeout: 200, ...build.options }));
}

/** A Cluster client over the seed `urls`, made by the module. */
export async function buildCluster(urls: string[], build: BuildOptions): Promise<RedisPort> {
  const { Cluster } = await loadIoRedis(build);
  const { redisOptions, ...clusterOptions } = build.options ?? {};
  return new IoRedisPort(
    new Cluster(urls, {
      ...clusterOptions,
      redisOptions: { disconnectTimeout: 200, ...(redisOptions as object | undefined) },
    }),
  );
}

function loadIoRedis(build: BuildOptions): Promise<IoRedisModule> {
  return loadOptionalPackage<IoRedisModule>('ioredis', build.field, build.usedFor, 'Redis');
}

/** A Redlock node's client options: how long the module waits on one node. */
export interface FailFastOptions extends BuildOptions {
  /** Bound on connecting and on each command, ms. */
  readonly nodeTimeout: number;
}

/**
 * A client of one Redlock node that fails fast on a down node instead of queueing: a quorum
 * algorithm must hear "no" at once from a dead node, not wait for it to come back.
 */
export async function buildFailFastClient(url: string, build: FailFastOptions): Promise<RedisPort> {
  const { Redis } = await loadIoRedis(build);
  return new IoRedisPort(
    new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: build.nodeTimeout,
      commandTimeout: build.nodeTimeout,
      retryStrategy: (times: number) => Math.min(50 * times, 1_000),
      // A dead node's socket never closes: do not keep the process alive 2 s for it on exit.
      disconnectTimeout: 200,
      ...build.options,
    }),
  );
}
