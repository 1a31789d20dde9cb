import { LockConfigError } from '../../errors/lock.errors';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import type { BackendFactory, SecretRedactor } from '../../core/contract/backend-factory';
import { checkExactlyOne, checkOptions } from '../../core/shared/options';
import type { RedisBackendConfig } from '../backend-config';
import type { RedisLikeClient } from './redis-client';
import { checkFenceBuckets } from './fence-bucket-option';
import { checkStartup, startOrClose } from './redis-startup';
import { checkRedisUrl } from './redis-url';
import { RedisLockBackend } from './redis.backend';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'url',
  'clusterNodes',
  'client',
  'redisOptions',
  'clusterOptions',
  'startup',
  'fenceBuckets',
]);
/**
 * How long `startup: 'fail'` waits for the first answer: ioredis's own default connect timeout,
 * so a store that refuses fails at once and one that never answers fails after that.
 */
const STARTUP_TIMEOUT_MS = 10_000;

/** Shape of the ioredis module we need (it is an optional peer, loaded on first use). */
interface IoRedisModule {
  Redis: new (url: string, options?: object) => RedisLikeClient;
  Cluster: new (nodes: string[], options?: object) => RedisLikeClient;
}

/** `type: 'redis'`: exactly one of `url`, `clusterNodes` or `client`. */
export const redisBackendFactory: BackendFactory<RedisBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a redis backend');
    checkExactlyOne(config, ['url', 'clusterNodes', 'client'], field);
    checkStartup(config.startup, `${field}.startup`);
    if (config.fenceBuckets !== undefined) {
      checkFenceBuckets(config.fenceBuckets, `${field}.fenceBuckets`);
      const cluster = (config.client as { isCluster?: unknown } | undefined)?.isCluster === true;
      if (config.clusterNodes !== undefined || cluster) {
        // A Cluster keeps one counter per hash slot (scripts must stay in the lock key's slot).
        throw new LockConfigError(
          `${field}.fenceBuckets`,
          'does not apply to a Redis Cluster (one fence counter per hash slot there)',
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
    if (config.client !== undefined && !isRedisClient(config.client)) {
      throw new LockConfigError(`${field}.client`, 'must be an ioredis Redis or Cluster instance');
    }
    for (const opt of ['redisOptions', 'clusterOptions'] as const) {
      const v = config[opt];
      if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
        throw new LockConfigError(`${field}.${opt}`, 'must be an object of ioredis options');
      }
      if (v !== undefined && config.client !== undefined) {
        throw new LockConfigError(
          `${field}.${opt}`,
          'cannot be combined with client (configure your own client instead)',
        );
      }
    }
  },

  async create(config, name, { redactor }) {
    const backend = await createBackend(config, name, redactor);
    if (config.startup === 'fail') {
      await startOrClose(backend, name, redactor, () => backend.ready(STARTUP_TIMEOUT_MS));
    }
    return backend;
  },
};

/** The backend over the client the configuration names (created here unless passed in). */
async function createBackend(
  config: RedisBackendConfig,
  name: string,
  redactor: SecretRedactor,
): Promise<RedisLockBackend> {
  if (config.client) {
    return new RedisLockBackend(
      config.client as unknown as RedisLikeClient,
      false,
      name,
      redactor,
      config.fenceBuckets,
    );
  }
  const field = `backends.${name}`;
  const { Redis, Cluster } = await loadOptionalPackage<IoRedisModule>(
    'ioredis',
    field,
    'the redis backend',
    'Redis',
  );
  if (config.clusterNodes) {
    const { redisOptions, ...clusterOptions } = config.clusterOptions ?? {};
    return new RedisLockBackend(
      new Cluster(config.clusterNodes, {
        ...clusterOptions,
        redisOptions: { disconnectTimeout: 200, ...(redisOptions as object | undefined) },
      }),
      true,
      name,
      redactor,
    );
  }
  // disconnectTimeout: a dead server's socket never closes; do not hold the exit 2 s for it.
  return new RedisLockBackend(
    new Redis(config.url!, { disconnectTimeout: 200, ...config.redisOptions }),
    true,
    name,
    redactor,
    config.fenceBuckets,
  );
}

function isRedisClient(value: unknown): boolean {
  const c = value as Partial<RedisLikeClient> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.evalsha === 'function' &&
    typeof c.duplicate === 'function'
  );
}
