/**
 * The client families the port contract runs for: how each makes a client as its user would
 * (not connected yet), and its options for "no offline queue".
 */
import type { PortFamily, UserClient } from './redis-port-contract';
import type { PortServers } from './port-servers';

/** The exports of ioredis 5 or 6 or iovalkey the fixtures use. */
interface IoRedisLibrary {
  Redis: new (url: string, options: object) => IoRedisUser;
  Cluster: new (nodes: string[], options: object) => IoRedisUser;
}
interface IoRedisUser {
  connect(): Promise<unknown>;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  disconnect(): void;
}

/** ioredis 5 or 6 (`packageName` the alias it is installed as), or iovalkey. */
export function ioRedisFamily(
  title: string,
  driver: 'ioredis' | 'iovalkey',
  library: unknown,
  packageName?: string,
): PortFamily {
  const { Redis, Cluster } = exportsOf<IoRedisLibrary>(library, 'Redis');
  const noOfflineQueue = { enableOfflineQueue: false };
  return {
    title,
    driver,
    packageName,
    family: driver,
    noOfflineQueue: { single: noOfflineQueue, cluster: noOfflineQueue },
    beforeConnect: 'connects',
    userClient(servers: PortServers): UserClient {
      const client = servers.cluster
        ? new Cluster([...servers.urls], { lazyConnect: true })
        : new Redis(servers.urls[0], { lazyConnect: true });
      return {
        client,
        connect: async () => {
          await client.connect();
        },
        onError: (listener) => client.on('error', listener),
        close: async () => client.disconnect(),
      };
    },
  };
}

/** The exports of node-redis 4, 5 or 6 the fixtures use. */
interface NodeRedisLibrary {
  createClient(options: object): NodeRedisUser;
  createCluster(options: object): NodeRedisUser;
}
interface NodeRedisUser {
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  disconnect(): Promise<unknown>;
}

/** node-redis 4, 5 or 6 (`packageName` the alias it is installed as). */
export function nodeRedisFamily(
  title: string,
  library: unknown,
  packageName?: string,
  options?: PortFamily['options'],
): PortFamily {
  const { createClient, createCluster } = exportsOf<NodeRedisLibrary>(library, 'createClient');
  return {
    title,
    driver: 'redis',
    packageName,
    family: 'node-redis',
    noOfflineQueue: {
      single: { disableOfflineQueue: true },
      cluster: { defaults: { disableOfflineQueue: true } },
    },
    options,
    beforeConnect: 'rejects',
    userClient(servers: PortServers): UserClient {
      const client = servers.cluster
        ? createCluster({ ...options?.cluster, rootNodes: servers.urls.map((url) => ({ url })) })
        : createClient({ ...options?.single, url: servers.urls[0] });
      return {
        client,
        connect: async () => {
          await client.connect();
        },
        onError: (listener) => client.on('error', listener),
        close: async () => {
          if (client.isOpen) await client.disconnect();
        },
      };
    },
  };
}

/** A CommonJS package's exports from its ES namespace (named ones, or all under `default`). */
export function exportsOf<T>(namespace: unknown, name: string): T {
  const ns = namespace as Record<string, unknown>;
  return (name in ns ? ns : ns.default) as T;
}
