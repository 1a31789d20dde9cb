import { afterAll, describe, expect, it } from '@jest/globals';
import { Cluster, Redis } from 'ioredis';
import { LockConfigError } from '../../lib/index';
import { createLockApp } from '../support/lock-app';
import {
  redisCommand,
  startRedisCluster,
  startRedisNode,
  stopAll,
} from '../../servers/redis-servers';

afterAll(() => stopAll());

describe('redis backend clients and connection options', () => {
  it('uses a client you pass and never closes it', async () => {
    const node = await startRedisNode();
    const client = new Redis(node.url);
    try {
      const t = await createLockApp({
        backends: { r: { type: 'redis', client, restartGuard: false } },
      });
      const lock = await t.locks.acquire('mine');
      expect(await client.exists(await firstKeyMatching(client, '*mine'))).toBe(1);
      await lock.release();
      await t.close();
      expect(client.status).toBe('ready');
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
      await node.stop();
    }
  });

  it('uses a Cluster client you pass and never closes it', async () => {
    const cluster = await startRedisCluster(3);
    const client = new Cluster(cluster.seeds);
    try {
      const t = await createLockApp({
        backends: { r: { type: 'redis', client, restartGuard: false } },
      });
      const lock = await t.locks.acquire('{brace} key');
      expect(typeof lock.fence).toBe('number');
      await lock.release();
      await t.close();
      expect(client.status).toBe('ready');
    } finally {
      client.disconnect();
      await cluster.stop();
    }
  });

  it('passes credentials through: password in the URL, ACL user, redisOptions', async () => {
    const node = await startRedisNode();
    // Credentials set after start (the harness's readiness PING is unauthenticated).
    expect(
      await redisCommand(node.port, 'ACL', 'SETUSER', 'locker', 'on', '>pw', '~*', '&*', '+@all'),
    ).toBe('+OK\r\n');
    expect(await redisCommand(node.port, 'CONFIG', 'SET', 'requirepass', 's3cret')).toBe('+OK\r\n');
    try {
      const byUrl = await createLockApp({
        backends: {
          r: { type: 'redis', url: `redis://:s3cret@127.0.0.1:${node.port}`, restartGuard: false },
        },
      });
      await (await byUrl.locks.acquire('a')).release();
      await byUrl.close();

      const byOptions = await createLockApp({
        backends: {
          r: {
            type: 'redis',
            url: node.url,
            redisOptions: { password: 's3cret' },
            restartGuard: false,
          },
        },
      });
      await (await byOptions.locks.acquire('b')).release();
      await byOptions.close();

      // An ACL user.
      const byAcl = await createLockApp({
        backends: {
          r: {
            type: 'redis',
            url: `redis://locker:pw@127.0.0.1:${node.port}`,
            restartGuard: false,
          },
        },
      });
      const lock = await byAcl.locks.acquire('c');
      expect(lock.isHeld()).toBe(true);
      await lock.release();
      await byAcl.close();

      // Wrong password: the store's refusal reaches the caller as a LockBackendError, no hang.
      const wrong = await createLockApp({
        backends: {
          r: {
            type: 'redis',
            url: `redis://:nope@127.0.0.1:${node.port}`,
            redisOptions: { maxRetriesPerRequest: 0 },
          },
        },
        operationTimeout: 2_000,
      });
      await expect(wrong.locks.acquire('d', { waitTimeout: 0 })).rejects.toMatchObject({
        code: 'LOCK_BACKEND',
      });
      await wrong.close();
    } finally {
      await node.stop();
    }
  }, 30_000);

  it('rejects bad redis options at bootstrap, naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ type: 'redis' }, 'backends.r'],
      [{ type: 'redis', url: 'http://x' }, 'backends.r.url'],
      [{ type: 'redis', url: 'redis://a', clusterNodes: ['redis://b'] }, 'backends.r'],
      [{ type: 'redis', clusterNodes: [] }, 'backends.r.clusterNodes'],
      [{ type: 'redis', client: {} }, 'backends.r.client'],
      [{ type: 'redis', url: 'redis://a', bogus: 1 }, 'backends.r.bogus'],
      [{ type: 'redlock', urls: [] }, 'backends.r.urls'],
      [{ type: 'redlock', urls: ['redis://a', 'redis://a'] }, 'backends.r.urls'],
      [{ type: 'redlock', urls: ['redis://a'], driftFactor: 2 }, 'backends.r.driftFactor'],
      // A Redlock client that queues commands while a node is down would stall every vote.
      [{ type: 'redlock', clients: [new Redis({ lazyConnect: true })] }, 'backends.r.clients[0]'],
    ];
    for (const [config, field] of cases) {
      const err = await createLockApp({ backends: { r: config as never } }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LockConfigError);
      expect((err as LockConfigError).field).toBe(field);
    }
  });

  it('raw check: the machine Redis answers (sanity for the suites that use it)', async () => {
    expect(await redisCommand(6379, 'PING')).toBe('+PONG\r\n');
  });
});

async function firstKeyMatching(client: Redis, pattern: string): Promise<string> {
  const keys = await client.keys(pattern);
  expect(keys).toHaveLength(1);
  return keys[0];
}
