/**
 * portOf and describeClient tell every supported client by its shape alone, without connecting
 * it: ioredis 5 and 6 and iovalkey `Redis` and `Cluster` (all reported as ioredis: an instance
 * does not say which package made it), node-redis 4, 5 and 6 clients and Clusters; anything else
 * (a pg Pool, a plain object, null) is no client.
 */
import { describe, expect, it } from '@jest/globals';
import * as ioredis5 from 'ioredis';
import * as ioredis6 from 'ioredis6';
import * as iovalkey from 'iovalkey';
import * as redis5 from 'redis';
import * as redis4 from 'redis4';
import * as redis6 from 'redis6';
import { describeClient, portOf } from '../../lib/backends/redis/port/client-ports';
import { IoRedisPort } from '../../lib/backends/redis/port/ioredis-port';
import { NodeRedisClusterPort } from '../../lib/backends/redis/port/node-redis-cluster-port';
import { NodeRedisPort } from '../../lib/backends/redis/port/node-redis-port';
import { exportsOf } from './families';

interface IoRedisLibrary {
  Redis: new (url: string, options: object) => { status: string; disconnect(): void };
  Cluster: new (nodes: string[], options: object) => { status: string; disconnect(): void };
}
interface NodeRedisLibrary {
  createClient(options: object): { isOpen: boolean };
  createCluster(options: object): { isOpen: boolean };
}

const URL = 'redis://127.0.0.1:6379';

describe('portOf and describeClient', () => {
  for (const [title, library] of [
    ['ioredis 5', ioredis5],
    ['ioredis 6', ioredis6],
    ['iovalkey', iovalkey],
  ] as const) {
    it(`${title}: a Redis and a Cluster, as ioredis, not connected by it`, () => {
      const { Redis, Cluster } = exportsOf<IoRedisLibrary>(library, 'Redis');
      const single = new Redis(URL, { lazyConnect: true });
      const cluster = new Cluster([URL], { lazyConnect: true });
      try {
        expect(describeClient(single)).toEqual({ family: 'ioredis', cluster: false });
        expect(describeClient(cluster)).toEqual({ family: 'ioredis', cluster: true });
        const port = portOf(single)!;
        const clusterPort = portOf(cluster)!;
        expect(port).toBeInstanceOf(IoRedisPort);
        expect([port.family, port.cluster, port.endpoint]).toEqual([
          'ioredis',
          false,
          '127.0.0.1:6379',
        ]);
        expect([clusterPort.family, clusterPort.cluster]).toEqual(['ioredis', true]);
        expect([single.status, cluster.status]).toEqual(['wait', 'wait']);
      } finally {
        single.disconnect();
        cluster.disconnect();
      }
    });
  }

  for (const [title, library] of [
    ['node-redis 4', redis4],
    ['node-redis 5', redis5],
    ['node-redis 6', redis6],
  ] as const) {
    it(`${title}: a client and a Cluster, as node-redis, not connected by it`, () => {
      const { createClient, createCluster } = exportsOf<NodeRedisLibrary>(library, 'createClient');
      const single = createClient({ url: URL });
      const cluster = createCluster({ rootNodes: [{ url: URL }] });
      expect(describeClient(single)).toEqual({ family: 'node-redis', cluster: false });
      expect(describeClient(cluster)).toEqual({ family: 'node-redis', cluster: true });
      const port = portOf(single)!;
      const clusterPort = portOf(cluster)!;
      expect(port).toBeInstanceOf(NodeRedisPort);
      expect(clusterPort).toBeInstanceOf(NodeRedisClusterPort);
      expect([port.family, port.cluster, port.endpoint]).toEqual([
        'node-redis',
        false,
        '127.0.0.1:6379',
      ]);
      expect([clusterPort.family, clusterPort.cluster]).toEqual(['node-redis', true]);
      expect([port.isReady(), clusterPort.isReady()]).toEqual([false, false]);
      expect([single.isOpen, cluster.isOpen]).toEqual([false, false]);
    });
  }

  it('the endpoint of a client on a Unix socket is its path', () => {
    const path = '/tmp/redis-port-test.sock';
    const io = new (exportsOf<IoRedisLibrary>(ioredis5, 'Redis').Redis)(`redis://unused`, {
      path,
      lazyConnect: true,
    });
    try {
      expect(portOf(io)!.endpoint).toBe(path);
      for (const library of [redis4, redis5, redis6]) {
        const { createClient } = exportsOf<NodeRedisLibrary>(library, 'createClient');
        expect(portOf(createClient({ socket: { path } }))!.endpoint).toBe(path);
      }
    } finally {
      io.disconnect();
    }
  });

  it('no client: a pg Pool, look-alikes, plain values', async () => {
    // pg has no types installed here: loaded by a name TypeScript does not resolve.
    const pgName = 'pg';
    const pg: unknown = await import(pgName);
    const { Pool } = exportsOf<{ Pool: new () => { end(): Promise<void> } }>(pg, 'Pool');
    const pool = new Pool();
    const poolLike = { query() {}, connect() {}, end() {}, on() {} };
    const halfIoRedis = { evalsha() {}, duplicate() {}, status: 'ready' };
    const halfNodeRedis = { sendCommand() {}, isOpen: true, isReady: true };
    try {
      for (const value of [
        pool,
        poolLike,
        halfIoRedis,
        halfNodeRedis,
        {},
        null,
        undefined,
        42,
        URL,
      ]) {
        expect(describeClient(value)).toBeUndefined();
        expect(portOf(value)).toBeUndefined();
      }
    } finally {
      await pool.end();
    }
  });
});
