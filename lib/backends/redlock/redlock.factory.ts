import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import {
  checkDuration,
  checkExactlyOne,
  checkObject,
  checkOptions,
} from '../../core/shared/options';
import type { RedlockBackendConfig } from '../backend-config';
import { endpointOf, RedisConnection } from '../redis/redis-connection';
import { checkFenceBuckets } from '../redis/fence-bucket-option';
import { checkStartup, startOrClose } from '../redis/redis-startup';
import { checkRedisUrl } from '../redis/redis-url';
import {
  RedlockLockBackend,
  type QuorumNode,
  type Redlock4,
  type RedlockNode,
} from './redlock.backend';
import { REDLOCK_UNLOCK_LUA } from './redlock-scripts';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'urls',
  'clients',
  'redisOptions',
  'driftFactor',
  'nodeTimeout',
  'startup',
  'fenceBuckets',
]);
const DEFAULT_DRIFT_FACTOR = 0.01;
const DEFAULT_NODE_TIMEOUT_MS = 2_000;

interface IoRedisModule {
  Redis: new (url: string, options?: object) => RedlockNode;
}
type RedlockCtor = (new (clients: readonly RedlockNode[], options: object) => Redlock4) & {
  LockError: unknown;
};

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
      list.forEach((c: unknown, i: number) => {
        const client = c as Partial<RedlockNode> | null;
        if (typeof client !== 'object' || client === null || typeof client.evalsha !== 'function') {
          throw new LockConfigError(`${listField}[${i}]`, 'must be an ioredis Redis instance');
        }
        // A quorum must hear "no" from a dead node at once: a client that queues commands while
        // disconnected would stall every vote until ioredis gives up (tens of seconds).
        const options = (client as { options?: { enableOfflineQueue?: unknown } }).options;
        if (options?.enableOfflineQueue !== false) {
          throw new LockConfigError(
            `${listField}[${i}]`,
            'create Redlock clients with enableOfflineQueue: false (and a commandTimeout), so a down node fails fast',
          );
        }
      });
      if (config.redisOptions !== undefined) {
        throw new LockConfigError(`${field}.redisOptions`, 'cannot be combined with clients');
      }
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
  },

  async create(config, name, { redactor }) {
    const field = `backends.${name}`;
    // redlock 4 is a CommonJS module whose export is the class itself.
    const Redlock = await loadOptionalPackage<RedlockCtor>(
      'redlock',
      field,
      'the redlock backend',
      'LockError',
    );
    const nodeTimeout = config.nodeTimeout ?? DEFAULT_NODE_TIMEOUT_MS;
    let clients: RedlockNode[];
    if (config.clients) {
      clients = config.clients as unknown as RedlockNode[];
    } else {
      const { Redis } = await loadOptionalPackage<IoRedisModule>(
        'ioredis',
        field,
        'the redlock backend',
        'Redis',
      );
      // Fail fast on a down node instead of queueing: a quorum algorithm must hear "no" at once
      // from a dead node, not wait for it to come back.
      clients = config.urls!.map(
        (url) =>
          new Redis(url, {
            enableOfflineQueue: false,
            maxRetriesPerRequest: 0,
            connectTimeout: nodeTimeout,
            commandTimeout: nodeTimeout,
            retryStrategy: (times: number) => Math.min(50 * times, 1_000),
            // A dead node's socket never closes: do not keep the process alive 2 s for it on exit.
            disconnectTimeout: 200,
            ...config.redisOptions,
          }),
      );
    }
    // Listening before anything else: a node already down would otherwise print raw
    // "[ioredis] Unhandled error event" stacks on stderr while the others connect.
    const nodes: QuorumNode[] = clients.map((client) => {
      const label = endpointOf(client, redactor);
      const connection = new RedisConnection(
        client,
        label,
        redactor,
        `redlock backend "${name}" node ${label}`,
        config.clients ? 'unhandled' : 'always',
      );
      return { client, connection, label };
    });
    // Give each node a moment to connect (commands are not queued): until it is ready or known
    // to be down, at most nodeTimeout. A down node is fine with 'degraded'.
    if (!config.clients) await Promise.all(nodes.map((n) => n.connection.settled(nodeTimeout)));
    // retryCount 0: the core owns waiting (v4 also ignores a per-call retryCount of 0).
    const redlock = new Redlock(clients, {
      driftFactor: config.driftFactor ?? DEFAULT_DRIFT_FACTOR,
      retryCount: 0,
      retryDelay: 0,
      retryJitter: 0,
      // Copies are tagged `<token> <fence>` after the grant: release compares the token part.
      unlockScript: () => REDLOCK_UNLOCK_LUA,
    });
    (redlock as unknown as { on(e: string, cb: () => void): void }).on(
      'clientError',
      () => undefined,
    );
    const backend = new RedlockLockBackend(
      redlock,
      nodes,
      !config.clients,
      name,
      config.driftFactor ?? DEFAULT_DRIFT_FACTOR,
      nodeTimeout,
      redactor,
      config.fenceBuckets,
    );
    if (config.startup === 'fail')
      await startOrClose(backend, name, redactor, () => backend.ready());
    return backend;
  },
};
