import { LockConfigError } from '../../../errors/lock.errors';
import { isModuleNotFound, loadOptionalPackage } from '../../../core/shared/optional-package';
import { IoRedisPort, type IoRedisLike } from './ioredis-port';
import { NodeRedisClusterPort, type NodeRedisClusterLike } from './node-redis-cluster-port';
import { NodeRedisPort, type NodeRedisClientLike } from './node-redis-port';
import type { RedisPort } from './redis-port';

/** The client libraries the module can make its clients with: the npm package names. */
export type RedisDriver = 'ioredis' | 'redis' | 'iovalkey';

/** Tried in this order when no driver is named: the first one installed makes the clients. */
export const REDIS_DRIVERS: readonly RedisDriver[] = ['ioredis', 'redis', 'iovalkey'];

/** Loads a package by name (`import()` unless a test or a bundler says otherwise). */
export type PackageLoader = (packageName: string) => Promise<unknown>;

/** What every build takes. */
export interface BuildCommon {
  /** The library to use; by default the first of {@link REDIS_DRIVERS} installed. */
  readonly driver?: RedisDriver;
  /**
   * The library's own options, passed through: ioredis/iovalkey `RedisOptions` (for a Cluster
   * `ClusterOptions`, with `redisOptions` inside), node-redis `createClient` options (for a
   * Cluster `createCluster` options without `rootNodes`).
   */
  readonly options?: object;
  /** The option that asked for the client, for a `LockConfigError`: `backends.main`. */
  readonly field: string;
  /** What needs the client, for a `LockConfigError`: `the redis backend`. */
  readonly usedFor: string;
  /** How packages are loaded (default `import()`). */
  readonly loader?: PackageLoader;
}

/** A single-node client. */
export interface BuildClient extends BuildCommon {
  /** Its server (a `redis://` or `rediss://` URL). */
  readonly url: string;
  /**
   * A Redlock node: no offline queue, `nodeTimeout` ms to connect and per command (node-redis 4
   * has no command timeout), reconnecting every 50 ms more, at most each second.
   */
  readonly failFast?: { readonly nodeTimeout: number };
}

/** A Cluster client. */
export interface BuildCluster extends BuildCommon {
  /** Its seeds (`redis://` URLs). */
  readonly urls: readonly string[];
}

/** The reconnect delay of the module's node-redis clients and Redlock nodes, by attempt. */
const reconnectDelay = (attempt: number): number => Math.min(50 * attempt, 1_000);
/** A dead server's socket never closes: ioredis waits this long for it on disconnect. */
const DISCONNECT_TIMEOUT_MS = 200;

/**
 * A client of one node, made by the module with the driver asked for (or the first installed),
 * already connecting in the background: never awaited, its state told by the port.
 */
export async function buildClient(spec: BuildClient): Promise<RedisPort> {
  const { driver, module } = await loadDriver(spec);
  const options = (spec.options ?? {}) as Record<string, unknown>;
  const timeout = spec.failFast?.nodeTimeout;
  if (driver !== 'redis') {
    const { Redis } = module as IoRedisModule;
    const failFast = timeout === undefined ? {} : ioRedisFailFast(timeout);
    const client = new Redis(spec.url, {
      disconnectTimeout: DISCONNECT_TIMEOUT_MS,
      ...failFast,
      ...options,
    });
    return new IoRedisPort(client, driver);
  }
  const socket = (options.socket ?? {}) as Record<string, unknown>;
  const commandOptions = (options.commandOptions ?? {}) as Record<string, unknown>;
  const client = (module as NodeRedisModule).createClient({
    ...(timeout === undefined ? {} : { disableOfflineQueue: true }),
    ...options,
    ...(timeout === undefined ? {} : { commandOptions: { timeout, ...commandOptions } }),
    // A copy: node-redis writes the URL's host and port into the socket options it is given.
    socket: {
      // Retrying for ever (node-redis 5 and 6 give up after a socket timeout by default), and
      // briefly: a pending delay survives close() and holds the process that long.
      reconnectStrategy: (retries: number) => reconnectDelay(retries + 1),
      ...(timeout === undefined ? {} : { connectTimeout: timeout }),
      ...socket,
    },
    url: spec.url,
  });
  const port = new NodeRedisPort(client, { guard: true });
  client.connect().catch(() => undefined); // its errors reach the port's listeners
  return port;
}

/** A Cluster client made by the module, connecting in the background (see {@link buildClient}). */
export async function buildCluster(spec: BuildCluster): Promise<RedisPort> {
  const { driver, module } = await loadDriver(spec);
  const options = (spec.options ?? {}) as Record<string, unknown>;
  if (driver !== 'redis') {
    const { redisOptions, ...clusterOptions } = options;
    const client = new (module as IoRedisModule).Cluster([...spec.urls], {
      ...clusterOptions,
      redisOptions: { disconnectTimeout: DISCONNECT_TIMEOUT_MS, ...(redisOptions as object) },
    });
    return new IoRedisPort(client, driver);
  }
  const defaults = (options.defaults ?? {}) as Record<string, unknown>;
  const cluster = (module as NodeRedisModule).createCluster({
    ...options,
    rootNodes: spec.urls.map((url) => ({ url })),
    defaults: {
      ...defaults,
      socket: {
        reconnectStrategy: (retries: number) => reconnectDelay(retries + 1),
        ...(defaults.socket as object | undefined),
      },
    },
  });
  return new NodeRedisClusterPort(cluster, { connect: true, seeds: spec.urls });
}

/** The ioredis options of a Redlock node (see {@link BuildClient.failFast}). */
function ioRedisFailFast(nodeTimeout: number): object {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: nodeTimeout,
    commandTimeout: nodeTimeout,
    retryStrategy: reconnectDelay,
  };
}

/** ioredis's and iovalkey's exports the builder uses. */
interface IoRedisModule {
  Redis: new (url: string, options?: object) => IoRedisLike;
  Cluster: new (nodes: string[], options?: object) => IoRedisLike;
}

/** node-redis's exports the builder uses. */
interface NodeRedisModule {
  createClient(options: object): NodeRedisClientLike;
  createCluster(options: object): NodeRedisClusterLike;
}

/** The export each driver must have (a check that it is the library it claims). */
const EXPORT_NEEDED: Record<RedisDriver, string> = {
  ioredis: 'Redis',
  iovalkey: 'Redis',
  redis: 'createClient',
};

/**
 * The driver named, or the first of {@link REDIS_DRIVERS} installed, loaded. A named driver
 * that is missing is a `LockConfigError` naming its package; none installed names all three.
 */
async function loadDriver(spec: BuildCommon): Promise<{ driver: RedisDriver; module: object }> {
  const { field, usedFor } = spec;
  const load = spec.loader ?? ((name: string) => import(name));
  const loadAs = (driver: RedisDriver, loader: () => Promise<unknown>): Promise<object> =>
    loadOptionalPackage<Record<string, unknown>>(
      driver,
      field,
      usedFor,
      EXPORT_NEEDED[driver],
      loader,
    );
  if (spec.driver !== undefined) {
    return { driver: spec.driver, module: await loadAs(spec.driver, () => load(spec.driver!)) };
  }
  for (const driver of REDIS_DRIVERS) {
    let loaded: unknown;
    try {
      loaded = await load(driver);
    } catch (err) {
      if (isModuleNotFound(err)) continue;
      throw err;
    }
    return { driver, module: await loadAs(driver, async () => loaded) };
  }
  throw new LockConfigError(
    field,
    `${usedFor} needs a Redis client library, and none of the optional packages "ioredis", "redis" or "iovalkey" is installed: run \`npm install ioredis\` (or redis, or iovalkey)`,
  );
}
