import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { LockBackendError, type LockEvent } from '../../lib';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { redisLockNames } from '../support/redis-names';
import { redisCommand, startRedisNode, type RedisNode } from '../../servers/redis-servers';
import { runLockConformance } from './lock-conformance';

// What the module writes in Redis, and what it leaves alone. Every name it writes sits under the
// module's keyPrefix: the core of the battery runs as a Redis user whose ACL allows only the
// prefix's keys and channels. A key that holds something the module did not write is refused,
// named, and never changed, whichever call meets it.

let aclNode: RedisNode | undefined;
afterAll(async () => {
  await aclNode?.stop();
});

runLockConformance({
  name: 'redis, as a user whose ACL allows only ~<keyPrefix>* and &<keyPrefix>*',
  setup: async (prefix) => {
    aclNode ??= await startRedisNode();
    const acl = [
      ...['ACL', 'SETUSER', 'prefixed', 'on', '>pw', 'resetkeys', `~${prefix}*`],
      ...['resetchannels', `&${prefix}*`, '+@all'],
    ];
    expect(await redisCommand(aclNode.port, ...acl)).toBe('+OK\r\n');
    // The default user may do nothing: only the prefixed user's own permissions are in play.
    expect(await redisCommand(aclNode.port, 'ACL', 'SETUSER', 'default', 'resetkeys')).toBe(
      '+OK\r\n',
    );
    const url = `redis://prefixed:pw@127.0.0.1:${aclNode.port}`;
    // The ACL bites: a key outside the prefix is refused to this user.
    const user = new Redis(url);
    try {
      await expect(user.set('outside', '1')).rejects.toThrow(/NOPERM/);
      await expect(user.set(`${prefix}inside`, '1')).resolves.toBe('OK');
    } finally {
      user.disconnect();
    }
    return { config: { type: 'redis', url, restartGuard: false } };
  },
  concerns: [
    'capabilities',
    'mutualExclusion',
    'leaseLifetime',
    'ownership',
    'fencing',
    'waiting',
    'lostLock',
    'renewalBatching',
    'admin',
    'sharing',
    'leadership',
  ],
  capabilities: {
    leaseBased: true,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
  },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});

describe('redis: a key holding what the module did not write', () => {
  const prefix = 'foreign:';
  let node: RedisNode;
  let raw: Redis;
  let app: LockTestApp;
  const errors: LockEvent[] = [];

  beforeAll(async () => {
    node = await startRedisNode();
    raw = new Redis(node.url);
    app = await createLockApp({
      keyPrefix: prefix,
      backends: { r: { type: 'redis', url: node.url, restartGuard: false } },
    });
    app.locks.on('error', (event) => errors.push(event));
  });
  afterAll(async () => {
    await app?.close();
    raw?.disconnect();
    await node?.stop();
  });

  /** Each foreign value: how to write it at the lock's name, and how to read it back. */
  const FOREIGN: Array<
    [string, string, (name: string) => Promise<unknown>, (name: string) => Promise<unknown>]
  > = [
    ['a string', 'string', (n) => raw.set(n, 'hello'), (n) => raw.get(n)],
    ['a string shaped like a lock value', 'string', (n) => raw.set(n, 'abc 5'), (n) => raw.get(n)],
    ['a set', 'set', (n) => raw.sadd(n, 'a', 'b'), (n) => raw.smembers(n)],
    ['a list', 'list', (n) => raw.rpush(n, 'a'), (n) => raw.lrange(n, 0, -1)],
    ['a hash', 'hash', (n) => raw.hset(n, 'field', 'value'), (n) => raw.hgetall(n)],
    ['a sorted set', 'zset', (n) => raw.zadd(n, 1, 'a'), (n) => raw.zrange(n, 0, -1)],
  ];

  it.each(FOREIGN)(
    '%s: every call refuses it with LockBackendError naming the key and type, emits error, leaves it as it was',
    async (_label, type, write, read) => {
      const key = `k-${type}-${Math.random().toString(36).slice(2, 8)}`;
      const name = redisLockNames(prefix, key).lock;
      await write(name);
      const before = await read(name);
      const pttl = await raw.pttl(name);
      errors.length = 0;
      const calls: Array<[string, () => Promise<unknown>]> = [
        ['tryAcquire', () => app.locks.tryAcquire(key)],
        ['acquire', () => app.locks.acquire(key, { waitTimeout: 2_000 })],
        ['shared', () => app.locks.acquire(key, { mode: 'shared', waitTimeout: 500 })],
        ['counted', () => app.locks.acquire(key, { permits: 3, waitTimeout: 500 })],
        ['inspect', () => app.locks.inspect(key)],
        ['isLocked', () => app.locks.isLocked(key)],
        ['forceRelease', () => app.locks.forceRelease(key)],
      ];
      for (const [call, run] of calls) {
        const error = await run().then(
          () => new Error(`${call} did not refuse`),
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(LockBackendError);
        expect((error as Error).message).toContain(`"${name}"`);
        expect((error as Error).message).toContain(`holds a ${type} this module did not write`);
      }
      // The acquisitions' failures are reported (the admin calls answer their caller only).
      expect(errors.filter((e) => e.key === key)).toHaveLength(4);
      expect(await read(name)).toEqual(before);
      expect(await raw.type(name)).toBe(type);
      expect(await raw.pttl(name)).toBe(pttl);
    },
  );

  it('a held lock whose key is overwritten with something else is lost at its next renewal, and the value stays', async () => {
    const lock = await app.locks.acquire('overwritten', { ttl: 600 });
    const name = redisLockNames(prefix, 'overwritten').lock;
    await raw.del(name);
    await raw.sadd(name, 'theirs');
    const lost = new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
    await lost;
    expect(lock.isHeld()).toBe(false);
    await lock.release();
    expect(await raw.smembers(name)).toEqual(['theirs']);
  });
});
