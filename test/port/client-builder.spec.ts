/**
 * The module's own clients: the driver named picks the library, else the first installed of
 * ioredis, redis (node-redis) and iovalkey; a missing library is a LockConfigError naming it.
 * Nothing listens on the URLs here: each client only starts connecting, and is closed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  buildClient,
  buildCluster,
  type PackageLoader,
} from '../../lib/backends/redis/port/client-builder';
import { IoRedisPort } from '../../lib/backends/redis/port/ioredis-port';
import { NodeRedisClusterPort } from '../../lib/backends/redis/port/node-redis-cluster-port';
import { NodeRedisPort } from '../../lib/backends/redis/port/node-redis-port';
import type { RedisPort } from '../../lib/backends/redis/port/redis-port';
import { LockConfigError } from '../../lib/errors/lock.errors';
import { findFreePort } from '../../servers/redis-servers';
import { settle } from '../support/async';

let url: string;
let urls: string[];
beforeAll(async () => {
  const ports = [await findFreePort(), await findFreePort()];
  url = `redis://127.0.0.1:${ports[0]}`;
  urls = ports.map((p) => `redis://127.0.0.1:${p}`);
});

const made: RedisPort[] = [];
afterAll(async () => {
  await Promise.all(made.map((p) => p.close()));
});

const common = { field: 'backends.main', usedFor: 'the redis backend' };

/** Loads packages as usual, except `missing`, which are not installed. */
function without(...missing: string[]): PackageLoader {
  return (name) =>
    missing.includes(name)
      ? Promise.reject(
          Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' }),
        )
      : import(name);
}

async function kept(port: Promise<RedisPort>): Promise<RedisPort> {
  made.push(await port);
  return made[made.length - 1];
}

describe('client builder', () => {
  it('uses the driver named', async () => {
    const io = await kept(buildClient({ ...common, url, driver: 'ioredis' }));
    const valkey = await kept(buildClient({ ...common, url, driver: 'iovalkey' }));
    const node = await kept(buildClient({ ...common, url, driver: 'redis' }));
    expect(io).toBeInstanceOf(IoRedisPort);
    expect(valkey).toBeInstanceOf(IoRedisPort);
    expect(node).toBeInstanceOf(NodeRedisPort);
    expect([io.family, valkey.family, node.family]).toEqual(['ioredis', 'iovalkey', 'node-redis']);
    for (const port of [io, valkey, node]) {
      expect(port.endpoint).toBe(url.slice('redis://'.length));
      expect(port.queuesOffline).toBe(true);
      expect(port.isReady()).toBe(false);
    }
  });

  it('without a driver named: the first installed of ioredis, redis, iovalkey', async () => {
    expect((await kept(buildClient({ ...common, url }))).family).toBe('ioredis');
    const loader = without('ioredis');
    expect((await kept(buildClient({ ...common, url, loader }))).family).toBe('node-redis');
    const onlyValkey = without('ioredis', 'redis');
    expect((await kept(buildClient({ ...common, url, loader: onlyValkey }))).family).toBe(
      'iovalkey',
    );
    const cluster = await kept(buildCluster({ ...common, urls, loader }));
    expect(cluster).toBeInstanceOf(NodeRedisClusterPort);
    expect([cluster.cluster, cluster.endpoint]).toEqual([true, `cluster ${urls.join(', ')}`]);
  });

  it('a Cluster with each driver', async () => {
    for (const driver of ['ioredis', 'iovalkey', 'redis'] as const) {
      const port = await kept(buildCluster({ ...common, urls, driver }));
      expect(port.cluster).toBe(true);
      expect(port.family).toBe(driver === 'redis' ? 'node-redis' : driver);
      for (const seed of urls) expect(port.endpoint).toContain(seed.slice('redis://'.length));
    }
  });

  it('a Redlock node (failFast) does not queue commands while disconnected', async () => {
    for (const driver of ['ioredis', 'iovalkey', 'redis'] as const) {
      const port = await kept(
        buildClient({ ...common, url, driver, failFast: { nodeTimeout: 500 } }),
      );
      expect(port.queuesOffline).toBe(false);
    }
  });

  it('a missing library is a LockConfigError naming it', async () => {
    const named = await settle(
      buildClient({ ...common, url, driver: 'iovalkey', loader: without('iovalkey') }),
    );
    expect(named.ok).toBe(false);
    const error = (named as { error: Error }).error;
    expect(error).toBeInstanceOf(LockConfigError);
    expect(error.message).toContain('backends.main');
    expect(error.message).toContain('"iovalkey"');
    expect(error.message).toContain('npm install iovalkey');

    const none = await settle(
      buildCluster({ ...common, urls, loader: without('ioredis', 'redis', 'iovalkey') }),
    );
    expect(none.ok).toBe(false);
    const noneError = (none as { error: Error }).error;
    expect(noneError).toBeInstanceOf(LockConfigError);
    for (const name of ['"ioredis"', '"redis"', '"iovalkey"']) {
      expect(noneError.message).toContain(name);
    }
  });

  it('a package that is not the library, or fails to load, is not taken for missing', async () => {
    const notIt = await settle(
      buildClient({ ...common, url, driver: 'redis', loader: async () => ({ Redis: {} }) }),
    );
    expect((notIt as { error: Error }).error).toBeInstanceOf(LockConfigError);
    expect((notIt as { error: Error }).error.message).toMatch(/"redis" has no createClient/);
    const broken = new SyntaxError('Unexpected token');
    const failed = await settle(
      buildClient({ ...common, url, loader: () => Promise.reject(broken) }),
    );
    expect((failed as { error: unknown }).error).toBe(broken);
  });
});
