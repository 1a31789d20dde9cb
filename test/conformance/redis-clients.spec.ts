import * as ioredis6 from 'ioredis6';
import * as iovalkey from 'iovalkey';
import * as redis5 from 'redis';
import * as redis4 from 'redis4';
import * as redis6 from 'redis6';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import { MACHINE_REDIS_URL, startRedisCluster, startRedisNodes } from '../../servers/redis-servers';
import { exportsOf } from '../port/families';
import type { ConcernName, ConformanceTarget } from './battery/fixture';
import { runLockConformance } from './lock-conformance';

// Every client family through the battery's exclusion, fencing, hand-off, loss, shared and counted
// locks and batched renewal concerns. The full battery runs on ioredis 5 (redis.spec.ts,
// redis-cluster.spec.ts, redlock.spec.ts); each family's own port is checked by the port contract
// (test/port). Single nodes use the machine's Redis (up for long: the restart guard is on, and
// trusts it); Clusters and Redlock nodes are fresh processes of their own.

/** The battery's concerns each client family runs. */
const CONCERNS: readonly ConcernName[] = [
  'capabilities',
  'mutualExclusion',
  'fencing',
  'waiting',
  'lostLock',
  'sharing',
  'renewalBatching',
  'leadership',
];

/** A user's client of one family, as a test's setup makes and closes it. */
interface UserClient {
  client: object;
  close(): Promise<void>;
}

const REDIS_CAPABILITIES: ConformanceTarget['capabilities'] = {
  leaseBased: true,
  fencing: true,
  waiting: 'queue-first',
  shared: true,
  permits: true,
};

/** An ioredis-shaped library's single-node client (connected). */
async function ioClient(library: unknown, url: string, options: object = {}): Promise<UserClient> {
  const { Redis } = exportsOf<{
    Redis: new (url: string, o: object) => { connect(): Promise<void>; disconnect(): void };
  }>(library, 'Redis');
  const client = new Redis(url, { lazyConnect: true, ...options });
  await client.connect();
  return { client, close: async () => client.disconnect() };
}

/** A node-redis library's client (connected), or a Cluster over `urls`. */
async function nodeRedisClient(
  library: unknown,
  urls: readonly string[],
  cluster: boolean,
  options: object = {},
): Promise<UserClient> {
  const { createClient, createCluster } = exportsOf<{
    createClient(o: object): NodeRedisUser;
    createCluster(o: object): NodeRedisUser;
  }>(library, 'createClient');
  const client = cluster
    ? createCluster({ rootNodes: urls.map((url) => ({ url })), defaults: options })
    : createClient({ url: urls[0], ...options });
  client.on('error', () => undefined);
  await client.connect();
  return {
    client,
    close: async () => {
      if (client.isOpen) await client.disconnect();
    },
  };
}
interface NodeRedisUser {
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  disconnect(): Promise<unknown>;
}

/** A single-node target on the machine's Redis with the client `make` gives. */
function singleNode(name: string, make: () => Promise<UserClient>): void {
  runLockConformance({
    name,
    setup: async () => {
      const user = await make();
      const config: LockBackendConfig = { type: 'redis', client: user.client };
      return { config, teardown: () => user.close() };
    },
    concerns: CONCERNS,
    capabilities: REDIS_CAPABILITIES,
    shortTtl: 300,
    sharedAcrossApps: true,
    admin: true,
    batchedRenewal: true,
  });
}

singleNode('redis on ioredis 6', () => ioClient(ioredis6, MACHINE_REDIS_URL));
singleNode('redis on iovalkey', () => ioClient(iovalkey, MACHINE_REDIS_URL));
singleNode('redis on node-redis 4', () => nodeRedisClient(redis4, [MACHINE_REDIS_URL], false));
singleNode('redis on node-redis 5', () => nodeRedisClient(redis5, [MACHINE_REDIS_URL], false));
singleNode('redis on node-redis 6', () => nodeRedisClient(redis6, [MACHINE_REDIS_URL], false));

runLockConformance({
  name: 'redis cluster on node-redis 5 (createCluster)',
  setup: async () => {
    const cluster = await startRedisCluster(3);
    const user = await nodeRedisClient(redis5, cluster.seeds, true);
    return {
      config: { type: 'redis', client: user.client },
      teardown: async () => {
        await user.close();
        await cluster.stop();
      },
    };
  },
  concerns: CONCERNS,
  capabilities: REDIS_CAPABILITIES,
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});

runLockConformance({
  name: 'redlock (3 nodes) on node-redis 5 clients',
  setup: async () => {
    const nodes = await startRedisNodes(3);
    const users = await Promise.all(
      nodes.map((n) => nodeRedisClient(redis5, [n.url], false, { disableOfflineQueue: true })),
    );
    return {
      config: { type: 'redlock', clients: users.map((u) => u.client), restartGuard: false },
      teardown: async () => {
        await Promise.all(users.map((u) => u.close()));
        await Promise.all(nodes.map((n) => n.stop()));
      },
    };
  },
  concerns: CONCERNS,
  capabilities: { leaseBased: true, fencing: true, waiting: 'poll', shared: false, permits: false },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});
