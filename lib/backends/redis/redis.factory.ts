import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory, BackendContext } from '../../core/contract/backend-factory';
import { checkExactlyOne, checkOptions } from '../../core/shared/options';
import type { RedisBackendConfig } from '../backend-config';
import { DEFAULT_FENCE_BUCKETS } from './fence-buckets';
import { checkFenceBuckets } from './fence-bucket-option';
import { buildClient, buildCluster } from './port/client-builder';
import { describeClient, portOf } from './port/client-ports';
import type { RedisPort } from './port/redis-port';
import { RedisKeyspace } from './redis-keys';
import { checkStartup, startOrClose } from './redis-startup';
import { RedisStore } from './redis-store';
import { checkRedisUrl } from './redis-url';
import { checkRestartGuard, RestartGuard } from './restart-guard';
import { RedisLockBackend } from './redis.backend';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'url',
  'clusterNodes',
  'client',
  'driver',
  'redisOptions',
  'clusterOptions',
  'startup',
  'fenceBuckets',
  'restartGuard',
]);
/**
 * How long `startup: 'fail'` waits for the first answer: ioredis's own default connect timeout,
 * so a store that refuses fails at once and one that never answers fails after that.
 */
const STARTUP_TIMEOUT_MS = 10_000;
/** The client libraries `driver` may name. */
const DRIVERS: ReadonlySet<unknown> = new Set(['ioredis', 'redis', 'iovalkey']);

/** `type: 'redis'`: exactly one of `url`, `clusterNodes` or `client`. */
export const redisBackendFactory: BackendFactory<RedisBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a redis backend');
    checkExactlyOne(config, ['url', 'clusterNodes', 'client'], field);
    checkStartup(config.startup, `${field}.startup`);
    const client = config.client === undefined ? undefined : describeClient(config.client);
    if (config.client !== undefined && !client) {
      throw new LockConfigError(
        `${field}.client`,
        'must be a Redis client: an ioredis or iovalkey Redis or Cluster, or a node-redis ' +
          'client or cluster (createClient / createCluster)',
      );
    }
    if (config.driver !== undefined) {
      if (!DRIVERS.has(config.driver)) {
        throw new LockConfigError(`${field}.driver`, "must be 'ioredis', 'redis' or 'iovalkey'");
      }
      if (config.client !== undefined) {
        throw new LockConfigError(`${field}.driver`, 'cannot be combined with client');
      }
    }
    if (config.fenceBuckets !== undefined) {
      checkFenceBuckets(config.fenceBuckets, `${field}.fenceBuckets`);
      if (config.clusterNodes !== undefined || client?.cluster) {
        // A Cluster keeps one counter per hash slot (scripts must stay in the lock key's slot).
        throw new LockConfigError(
          `${field}.fenceBuckets`,
          'does not apply to a Redis Cluster (one fence counter per hash slot there)',
        );
      }
    }
    if (config.restartGuard !== undefined) {
      checkRestartGuard(config.restartGuard, `${field}.restartGuard`);
      if (config.restartGuard !== false && (config.clusterNodes !== undefined || client?.cluster)) {
        throw new LockConfigError(
          `${field}.restartGuard`,
          'does not apply to a Redis Cluster (a restarted master is replaced by a replica there)',
        );
      }
    }
    if (config.url !== undefined) checkRedisUrl(config.url, `${field}.url`);
    if (config.clusterNodes !== undefined) {
      if (!Array.isArray(config.clusterNodes) || config.clusterNodes.length === 0) {
        throw new LockConfigError(
          `${field}.clusterNodes`,
          'must be a non-empty array of redis:// URLs',
        );
      }
      config.clusterNodes.forEach((u, i) => checkRedisUrl(u, `${field}.clusterNodes[${i}]`));
    }
    for (const opt of ['redisOptions', 'clusterOptions'] as const) {
      const v = config[opt];
      if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
        throw new LockConfigError(`${field}.${opt}`, 'must be an object of client options');
      }
      if (v !== undefined && config.client !== undefined) {
        throw new LockConfigError(
          `${field}.${opt}`,
          'cannot be combined with client (configure your own client instead)',
        );
      }
    }
  },

  async create(config, name, context) {
    const field = `backends.${name}`;
    const cluster = config.clusterNodes !== undefined || describeClient(config.client)?.cluster;
    if (cluster) checkClusterPrefix(context.keyPrefix);
    const port = config.client ? portOf(config.client)! : await buildPort(config, field);
    const store = new RedisStore(
      port,
      new RedisKeyspace(context.keyPrefix),
      name,
      context.redactor,
      !config.client,
      config.fenceBuckets ?? DEFAULT_FENCE_BUCKETS,
    );
    const guard = new RestartGuard(
      store.connection,
      (args) => store.command(args),
      port.cluster ? false : (config.restartGuard ?? context.defaultTtl),
      `redis backend "${name}"`,
    );
    const backend = new RedisLockBackend(store, port, !config.client, guard);
    if (config.startup === 'fail') {
      await startOrClose(backend, name, context.redactor, () => backend.ready(STARTUP_TIMEOUT_MS));
    }
    return backend;
  },
};

/** The client the module makes from `url` or `clusterNodes`. */
function buildPort(config: RedisBackendConfig, field: string): Promise<RedisPort> {
  const build = { field, usedFor: 'the redis backend', driver: config.driver };
  if (config.clusterNodes) {
    return buildCluster({ ...build, urls: config.clusterNodes, options: config.clusterOptions });
  }
  return buildClient({ ...build, url: config.url!, options: config.redisOptions });
}

/**
 * On a Cluster, every name of one lock (and its fence counter) must share a slot: a `{` in
 * `keyPrefix` must open a non-empty hash tag closed within the prefix (which then puts every
 * lock in that tag's slot), or Redis would read a tag made of the prefix's tail and ours.
 */
function checkClusterPrefix(prefix: BackendContext['keyPrefix']): void {
  const open = prefix.indexOf('{');
  if (open < 0) return;
  const close = prefix.indexOf('}', open + 1);
  if (close > open + 1) return;
  throw new LockConfigError(
    'keyPrefix',
    'on a Redis Cluster, a "{" in keyPrefix must open a non-empty hash tag closed within the ' +
      'prefix (for example "{app}:"), so that all of a lock\'s keys share a hash slot',
  );
}
