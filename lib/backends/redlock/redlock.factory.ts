import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import {
  checkDuration,
  checkExactlyOne,
  checkObject,
  checkOptions,
} from '../../core/shared/options';
import type { RedlockBackendConfig } from '../backend-config';
import { DEFAULT_FENCE_BUCKETS } from '../redis/fence-buckets';
import { checkFenceBuckets } from '../redis/fence-bucket-option';
import { buildClient, type RedisDriver } from '../redis/port/client-builder';
import { describeClient, portOf } from '../redis/port/client-ports';
import type { RedisPort } from '../redis/port/redis-port';
import { RedisKeyspace } from '../redis/redis-keys';
import { checkStartup, startOrClose } from '../redis/redis-startup';
import { checkRedisUrl } from '../redis/redis-url';
import { checkRestartGuard } from '../redis/restart-guard';
import { Quorum } from './quorum';
import { QuorumNode } from './quorum-node';
import { RedlockLockBackend } from './redlock.backend';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'urls',
  'clients',
  'driver',
  'redisOptions',
  'driftFactor',
  'nodeTimeout',
  'startup',
  'fenceBuckets',
  'restartGuard',
]);
const DEFAULT_DRIFT_FACTOR = 0.01;
const DEFAULT_NODE_TIMEOUT_MS = 2_000;
/** The client libraries `driver` may name. */
const DRIVERS: ReadonlySet<unknown> = new Set(['ioredis', 'redis', 'iovalkey']);

/** `type: 'redlock'`: exactly one of `urls` or `clients`. */
export const redlockBackendFactory: BackendFactory<RedlockBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a redlock backend');
    const listField = `${field}.${checkExactlyOne(config, ['urls', 'clients'], field)}`;
    const list: unknown = config.urls ?? config.clients;
    if (!Array.isArray(list) || list.length === 0) {
      throw new LockConfigError(
        listField,
        'must be a non-empty array (one entry per independent Redis node)',
      );
    }
    if (config.urls !== undefined) {
      list.forEach((u: unknown, i: number) => checkRedisUrl(u, `${listField}[${i}]`));
      if (new Set(list).size !== list.length)
        throw new LockConfigError(listField, 'lists a node twice');
    } else {
      list.forEach((c: unknown, i: number) => checkNodeClient(c, `${listField}[${i}]`));
      if (new Set(list).size !== list.length)
        throw new LockConfigError(listField, 'lists a client twice');
      for (const opt of ['redisOptions', 'driver'] as const) {
        if (config[opt] !== undefined) {
          throw new LockConfigError(`${field}.${opt}`, 'cannot be combined with clients');
        }
      }
    }
    if (config.driver !== undefined && !DRIVERS.has(config.driver)) {
      throw new LockConfigError(`${field}.driver`, "must be 'ioredis', 'redis' or 'iovalkey'");
    }
    const drift = config.driftFactor;
    if (drift !== undefined && (typeof drift !== 'number' || !(drift >= 0 && drift < 0.5))) {
      throw new LockConfigError(`${field}.driftFactor`, 'must be a number in [0, 0.5)');
    }
    if (config.nodeTimeout !== undefined) checkDuration(config.nodeTimeout, `${field}.nodeTimeout`);
    checkStartup(config.startup, `${field}.startup`);
    if (config.fenceBuckets !== undefined) {
      checkFenceBuckets(config.fenceBuckets, `${field}.fenceBuckets`);
    }
    if (config.redisOptions !== undefined)
      checkObject(config.redisOptions, `${field}.redisOptions`);
    if (config.restartGuard !== undefined) {
      checkRestartGuard(config.restartGuard, `${field}.restartGuard`);
    }
  },

  async create(config, name, context) {
    const field = `backends.${name}`;
    const { redactor } = context;
    const nodeTimeout = config.nodeTimeout ?? DEFAULT_NODE_TIMEOUT_MS;
    const ports: RedisPort[] = config.clients
      ? config.clients.map((client) => portOf(client)!)
      : await Promise.all(
          config.urls!.map((url) =>
            buildClient({
              url,
              field,
              usedFor: 'the redlock backend',
              driver: config.driver as RedisDriver | undefined,
              options: config.redisOptions,
              failFast: { nodeTimeout },
            }),
          ),
        );
    const keyspace = new RedisKeyspace(context.keyPrefix);
    // Watching before anything else: a node already down would otherwise print raw
    // "Unhandled error event" stacks on stderr while the others connect.
    const nodes = ports.map(
      (port) =>
        new QuorumNode(
          port,
          keyspace,
          name,
          redactor,
          !config.clients,
          config.fenceBuckets ?? DEFAULT_FENCE_BUCKETS,
          config.restartGuard ?? context.defaultTtl,
        ),
    );
    // Give each node a moment to connect (commands are not queued): until it is ready or known
    // to be down, at most nodeTimeout. A down node is fine with 'degraded'.
    if (!config.clients) await Promise.all(nodes.map((n) => n.connection.settled(nodeTimeout)));
    const backend = new RedlockLockBackend(
      new Quorum(nodes, name, redactor, nodeTimeout),
      keyspace,
      !config.clients,
      name,
      config.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    );
    if (config.startup === 'fail') {
      await startOrClose(backend, name, redactor, () => backend.ready());
    }
    return backend;
  },
};

/**
 * One of `clients`: a single node's client (not a Cluster's) that does not queue commands while
 * disconnected: a quorum algorithm must hear "no" from a dead node at once, not wait for it to
 * come back (a client that queues stalls every vote until it gives up, tens of seconds).
 */
function checkNodeClient(client: unknown, field: string): void {
  const described = describeClient(client);
  if (!described || described.cluster) {
    throw new LockConfigError(
      field,
      "must be one Redis node's client: an ioredis or iovalkey Redis, or a node-redis client",
    );
  }
  if (portOf(client)!.queuesOffline !== false) {
    throw new LockConfigError(
      field,
      'create Redlock clients without an offline queue (ioredis and iovalkey: ' +
        'enableOfflineQueue: false and a commandTimeout; node-redis: disableOfflineQueue: true), ' +
        'so a down node fails fast',
    );
  }
}
