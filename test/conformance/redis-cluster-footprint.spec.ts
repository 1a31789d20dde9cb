import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Redis from 'ioredis';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { LockConfigError } from '../../lib';
import { RedisKeyspace } from '../../lib/backends/redis/redis-keys';
import { redisBackendFactory } from '../../lib/backends/redis/redis.factory';
import type { RedisBackendConfig } from '../../lib/backends/backend-config';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import {
  bucketMates,
  evalshaCalls,
  fencesWithMatesBetween,
  footprint,
  lockAndRelease,
  ownerToken as token,
} from '../support/fence-footprint';
import { redisLockNames } from '../support/redis-names';
import {
  redisCommand,
  startRedisCluster,
  type RedisClusterHandle,
} from '../../servers/redis-servers';

// A three-master Redis Cluster of its own: one fence counter per hash slot, in that slot (so
// every script stays single-slot), however many keys; fences of a key rise strictly; a key
// prefix with a hash tag of its own keeps every name in its slot; extendMany sends each master
// one pipeline of per-slot script calls, and a master that fails fails only its leases.
const fenceCounterName = (slot: number): string => new RedisKeyspace('').counter(slot);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('redis cluster: fence counters per hash slot and extendMany', () => {
  let cluster: RedisClusterHandle;
  let masters: Redis[];
  let app: LockTestApp;
  let backend: LockBackend;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    masters = cluster.nodes.map((n) => new Redis(n.url));
    app = await createLockApp({ backends: { r: { type: 'redis', clusterNodes: cluster.seeds } } });
    backend = app.manager.getBackend('r');
  });
  afterAll(async () => {
    await app?.close();
    for (const m of masters ?? []) m.disconnect();
    await cluster?.stop();
  });

  /** Index in `masters` of the master serving `slot` (CLUSTER SLOTS). */
  async function masterOf(slot: number): Promise<number> {
    const ranges = (await masters[0].call('CLUSTER', 'SLOTS')) as Array<
      [number, number, [string, number]]
    >;
    const range = ranges.find(([lo, hi]) => slot >= lo && slot <= hi)!;
    return cluster.nodes.findIndex((n) => n.port === Number(range[2][1]));
  }

  it('2,000 distinct keys in 64 slots leave one counter per slot used (<= 64), each in its slot', async () => {
    // Keys searched so that their lock keys fall in 64 slots (every 256th): the bound shows.
    const keys: string[] = [];
    for (let n = 0; keys.length < 2_000; n++) {
      if (redisLockNames('', `cfp:${n}`).slot % 256 === 0) keys.push(`cfp:${n}`);
    }
    const slots = new Set(keys.map((k) => redisLockNames('', k).slot));
    await lockAndRelease(backend, keys);
    let counters = 0;
    for (const master of masters) {
      const left = await footprint(master);
      expect(left.others).toEqual([]);
      counters += left.counters.length;
      for (const counter of left.counters) {
        expect(slots.has(Number(await master.call('CLUSTER', 'KEYSLOT', counter)))).toBe(true);
      }
    }
    expect(counters).toBe(slots.size);
    expect(counters).toBeLessThanOrEqual(64);
    // The counter names' hash tags hash (on the server) to the slot they stand for.
    for (const slot of [0, 1, 12_182, 16_383, ...[...slots].slice(0, 10)]) {
      expect(Number(await masters[0].call('CLUSTER', 'KEYSLOT', fenceCounterName(slot)))).toBe(
        slot,
      );
    }
  });

  it("a key's fences rise strictly while other keys of its slot are granted in between", async () => {
    const key = 'cfp:mine';
    const mates = bucketMates(key, 'cfp:mate:', 10, null);
    const { mine } = await fencesWithMatesBetween(backend, key, mates, 30);
    for (let i = 1; i < mine.length; i++) expect(mine[i]).toBeGreaterThan(mine[i - 1]);
    const t = token();
    const held = await backend.tryAcquire({ key, token: t, ttlMs: 10_000 });
    await lockAndRelease(backend, mates, 5);
    expect(await backend.inspect!(key)).toMatchObject({ held: true, fence: held!.fence });
    await backend.release(key, t);
  });

  it('a keyPrefix with a hash tag of its own puts every name in its slot; an unclosed "{" is refused', async () => {
    const prefix = '{app}:';
    const tagged = await createLockApp({
      keyPrefix: prefix,
      backends: { r: { type: 'redis', clusterNodes: cluster.seeds } },
    });
    try {
      const lock = await tagged.locks.acquire('k');
      const slot = Number(await masters[0].call('CLUSTER', 'KEYSLOT', 'app'));
      const master = masters[await masterOf(slot)];
      const names = redisLockNames(prefix, 'k');
      expect(await master.get(names.lock)).toBe(`${lock.token} ${lock.fence}`);
      const counter = new RedisKeyspace(prefix).counter(slot);
      expect(Number(await master.call('CLUSTER', 'KEYSLOT', counter))).toBe(slot);
      expect(Number(await master.get(counter))).toBe(lock.fence);
      await lock.release();
      const again = await tagged.locks.acquire('other');
      expect(again.fence).toBeGreaterThan(lock.fence!);
      await again.release();
    } finally {
      await tagged.close();
    }
    for (const bad of ['a{b:', 'x{}:']) {
      await expect(
        createLockApp({
          keyPrefix: bad,
          backends: { r: { type: 'redis', clusterNodes: cluster.seeds } },
        }),
      ).rejects.toThrow(LockConfigError);
    }
  });

  it('extendMany: a mixed batch renews only ours, one pipeline of per-slot calls per master', async () => {
    const held = Array.from({ length: 300 }, (_, i) => ({
      key: `cfp:x:${i}`,
      token: token(),
      ttlMs: 5_000,
    }));
    for (const r of held) expect(await backend.tryAcquire(r)).not.toBeNull();
    const expired = { key: 'cfp:x:expired', token: token(), ttlMs: 50 };
    const stolen = { key: 'cfp:x:stolen', token: token(), ttlMs: 50 };
    const forced = { key: 'cfp:x:forced', token: token(), ttlMs: 5_000 };
    for (const r of [expired, stolen, forced]) await backend.tryAcquire(r);
    await sleep(100);
    await backend.tryAcquire({ key: stolen.key, token: token(), ttlMs: 5_000 });
    await backend.forceRelease!(forced.key);
    await backend.extendMany!(held); // every master learns the script
    const before = await Promise.all(masters.map(evalshaCalls));
    const batch = [
      ...held.map((r) => ({ ...r, ttlMs: 60_000 })),
      { ...expired, ttlMs: 60_000 },
      { ...stolen, ttlMs: 60_000 },
      { ...forced, ttlMs: 60_000 },
    ];
    const results = await backend.extendMany!(batch);
    expect(results).toEqual([...held.map(() => true), false, false, false]);
    for (const r of held.slice(0, 20)) {
      const n = redisLockNames('', r.key);
      expect(await masters[await masterOf(n.slot)].pttl(n.lock)).toBeGreaterThan(55_000);
    }
    const n = redisLockNames('', stolen.key);
    expect(await masters[await masterOf(n.slot)].pttl(n.lock)).toBeLessThanOrEqual(5_000);
    // One script call per slot (a script's keys must share one), sent to the slot's master.
    const perMaster = [0, 0, 0];
    for (const slot of new Set(batch.map((r) => redisLockNames('', r.key).slot))) {
      perMaster[await masterOf(slot)]++;
    }
    const after = await Promise.all(masters.map(evalshaCalls));
    expect(after.map((calls, i) => calls - before[i])).toEqual(perMaster);
  });

  it('extendMany: a master that refuses fails only its own leases (an Error each)', async () => {
    const leases = Array.from({ length: 60 }, (_, i) => ({
      key: `cfp:refuse:${i}`,
      token: token(),
      ttlMs: 10_000,
    }));
    for (const r of leases) await backend.tryAcquire(r);
    const owner = await Promise.all(leases.map((r) => masterOf(redisLockNames('', r.key).slot)));
    const refusing = owner[0];
    // That master's default user may no longer run scripts (it still answers everything else).
    await redisCommand(
      cluster.nodes[refusing].port,
      'ACL',
      'SETUSER',
      'default',
      '-evalsha',
      '-eval',
    );
    try {
      const results = await backend.extendMany!(leases);
      results.forEach((result, i) => {
        if (owner[i] === refusing) expect(result).toBeInstanceOf(Error);
        else expect(result).toBe(true);
      });
      expect(owner.some((o) => o !== refusing)).toBe(true);
    } finally {
      await redisCommand(cluster.nodes[refusing].port, 'ACL', 'SETUSER', 'default', '+@all');
    }
  });

  it('fenceBuckets is refused for a Cluster (one counter per slot there), and checked', () => {
    const check = (config: Partial<RedisBackendConfig>) => () =>
      redisBackendFactory.validate(
        { type: 'redis', ...config } as RedisBackendConfig & Record<string, unknown>,
        'backends.r',
      );
    expect(check({ clusterNodes: cluster.seeds, fenceBuckets: 64 })).toThrow(
      expect.objectContaining({ field: 'backends.r.fenceBuckets' }),
    );
    for (const bad of [0, 16_385, 1.5, '64', -1]) {
      expect(check({ url: 'redis://127.0.0.1:6379', fenceBuckets: bad as number })).toThrow(
        expect.objectContaining({ field: 'backends.r.fenceBuckets' }),
      );
    }
    expect(check({ url: 'redis://127.0.0.1:6379', fenceBuckets: 16_384 })).not.toThrow();
  });
});
