import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import Redis from 'ioredis';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import type { LockModuleOptions } from '../../lib';
import { hashSlot } from '../../lib/backends/redis/port/key-slot';
import { fenceBucket } from '../../lib/backends/redis/fence-buckets';
import { RedisKeyspace } from '../../lib/backends/redis/redis-keys';
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
import { startRedisNode, type RedisNode } from '../../servers/redis-servers';

// One Redis node of its own (so DBSIZE and INFO count only this spec's keys and calls): the
// fence counters left behind stay within `fenceBuckets` however many distinct keys are locked,
// each key's fences still rise strictly, a change of `fenceBuckets` keeps fences rising, and
// extendMany renews a batch in one pipeline.
const keyspace = new RedisKeyspace('');
const fenceCounterName = (bucket: number): string => keyspace.counter(bucket);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('redis (single node): fence buckets and extendMany', () => {
  let node: RedisNode;
  let raw: Redis;
  const apps: LockTestApp[] = [];

  /** An app on this spec's node; its backend `r`. */
  async function start(fenceBuckets?: number): Promise<{ app: LockTestApp; backend: LockBackend }> {
    const options: LockModuleOptions = {
      backends: {
        r: {
          type: 'redis',
          url: node.url,
          restartGuard: false,
          ...(fenceBuckets ? { fenceBuckets } : {}),
        },
      },
    };
    const app = await createLockApp(options);
    apps.push(app);
    return { app, backend: app.manager.getBackend('r') };
  }

  beforeAll(async () => {
    node = await startRedisNode();
    raw = new Redis(node.url);
  });
  beforeEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await raw.flushall();
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    raw.disconnect();
    await node.stop();
  });

  it('2,000 distinct keys locked and released (some contended) leave at most fenceBuckets (64) counters', async () => {
    const { app, backend } = await start(64);
    const keys = Array.from({ length: 2_000 }, (_, i) => `fp:${i}`);
    await lockAndRelease(backend, keys);
    // Queued waiters too: their queue, expiries and arrival counter must not stay either.
    for (let i = 0; i < 5; i++) {
      const held = await app.locks.acquire(`fp:queued:${i}`);
      const waiter = app.locks.acquire(`fp:queued:${i}`, { waitTimeout: 5_000 });
      await sleep(50);
      await held.release();
      await (await waiter).release();
    }
    const left = await footprint(raw);
    expect(left.counters.length).toBeLessThanOrEqual(64);
    expect(left.counters.length).toBeGreaterThan(50); // 2,000 keys hit (nearly) every bucket
    // No lock, queue or per-key counter is left; only the arrival counters, which expire
    // (2 x the 3 s waiter ttl) like the queues they ordered.
    for (const { key, pttl } of left.others) {
      expect(key).toMatch(/:arrivals$/);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(6_000);
    }
    expect(left.others.length).toBeLessThanOrEqual(5);
    expect(await raw.dbsize()).toBeLessThanOrEqual(64 + 5);
  });

  it('with the default 4,096 buckets, 6,000 distinct keys leave at most 4,096 counters', async () => {
    const { backend } = await start();
    const startedAt = performance.now();
    await lockAndRelease(
      backend,
      Array.from({ length: 6_000 }, (_, i) => `fp:default:${i}`),
    );
    expect(performance.now() - startedAt).toBeLessThan(20_000);
    const left = await footprint(raw);
    expect(left.others).toEqual([]);
    expect(left.counters.length).toBeLessThanOrEqual(4_096);
    expect(await raw.dbsize()).toBeLessThanOrEqual(4_096);
  });

  it("a key's fences rise strictly while other keys of its bucket are granted in between", async () => {
    const { backend } = await start(64);
    const key = 'fp:mine';
    const mates = bucketMates(key, 'fp:mate:', 20, 64);
    const { mine, all } = await fencesWithMatesBetween(backend, key, mates, 50);
    for (let i = 1; i < mine.length; i++) expect(mine[i]).toBeGreaterThan(mine[i - 1]);
    // One counter served them all: every grant in the bucket got a fence of its own.
    expect(new Set(all).size).toBe(all.length);
    // While held, inspect gives the holder's fence (not the counter other keys move on).
    const t = token();
    const held = await backend.tryAcquire({ key, token: t, ttlMs: 10_000 });
    await lockAndRelease(backend, mates, 5);
    expect(await backend.inspect!(key)).toMatchObject({ held: true, fence: held!.fence });
    await backend.release(key, t);
    // Free: the bucket counter, at least the key's last fence (the next grant's is higher).
    const free = await backend.inspect!(key);
    expect(free.held).toBe(false);
    expect(free.fence!).toBeGreaterThan(held!.fence!);
    const next = await backend.tryAcquire({ key, token: token(), ttlMs: 1_000 });
    expect(next!.fence!).toBeGreaterThan(free.fence!);
  });

  it('instances on different fenceBuckets side by side, and counters lost: every key keeps its fences rising', async () => {
    const on64 = await start(64);
    const on128 = await start(128);
    // Keys whose buckets differ between the two counts (slot % 128 >= 64): two counters each.
    const keys = ['fp:move:a', 'fp:move:b', 'fp:move:c', 'fp:move:d'].filter(
      (key) => redisLockNames('', key).slot % 128 >= 64,
    );
    expect(keys.length).toBeGreaterThan(0);
    const seen = new Map<string, number[]>();
    const grant = async (backend: LockBackend, key: string): Promise<void> => {
      const fences = await lockAndRelease(backend, [key]);
      seen.set(key, [...(seen.get(key) ?? []), fences.get(key)!]);
    };
    for (let round = 0; round < 20; round++) {
      for (const key of keys) await grant(round % 2 === 0 ? on64.backend : on128.backend, key);
    }
    // One counter far ahead of the clock (a grant storm, or a clock that stepped back): the key
    // drawing from it keeps rising past it.
    const ahead = keyspace.counter(redisLockNames('', keys[0]).slot % 64);
    const far = Number(await raw.get(ahead)) + 10_000_000_000;
    await raw.set(ahead, far);
    await grant(on64.backend, keys[0]);
    expect(seen.get(keys[0])!.at(-1)!).toBe(far + 1);
    await grant(on128.backend, keys[0]); // its other counter follows the clock: below `far`
    // Every counter lost (a restart without data): the next fences still rise.
    await raw.flushall();
    for (const key of keys) await grant(on128.backend, key);
    for (const [key, fences] of seen) {
      const rising = fences.every((f, i) => i === 0 || f > fences[i - 1]);
      // The one counter set ahead of the clock is the exception the clock cannot cover.
      if (key !== keys[0]) expect({ key, rising }).toEqual({ key, rising: true });
    }
    const first = seen.get(keys[0])!;
    expect(first.slice(0, -3).every((f, i) => i === 0 || f > first[i - 1])).toBe(true);
    const left = await footprint(raw);
    expect(left.others).toEqual([]);
  });

  it('extendMany renews only the leases its own tokens still hold, one result per request', async () => {
    const { backend } = await start();
    const grant = async (key: string, ttlMs: number): Promise<string> => {
      const t = token();
      expect(await backend.tryAcquire({ key, token: t, ttlMs })).not.toBeNull();
      return t;
    };
    const ours = await grant('fp:x:ours', 10_000);
    const expired = await grant('fp:x:expired', 50);
    const stolen = await grant('fp:x:stolen', 50);
    const forced = await grant('fp:x:forced', 10_000);
    await sleep(100);
    await grant('fp:x:stolen', 5_000); // someone else's now
    expect(await backend.forceRelease!('fp:x:forced')).toBe(true);
    await raw.hset(redisLockNames('', 'fp:x:typed').lock, 'x', '1'); // a key of another type
    const results = await backend.extendMany!([
      { key: 'fp:x:ours', token: ours, ttlMs: 60_000 },
      { key: 'fp:x:expired', token: expired, ttlMs: 60_000 },
      { key: 'fp:x:stolen', token: stolen, ttlMs: 60_000 },
      { key: 'fp:x:forced', token: forced, ttlMs: 60_000 },
      { key: 'fp:x:never', token: token(), ttlMs: 60_000 },
      { key: 'fp:x:typed', token: token(), ttlMs: 60_000 },
    ]);
    // A key that holds what the module did not write is no longer ours (and is left as it is).
    expect(results).toEqual([true, false, false, false, false, false]);
    expect(await raw.hget(redisLockNames('', 'fp:x:typed').lock, 'x')).toBe('1');
    expect(await raw.pttl(redisLockNames('', 'fp:x:ours').lock)).toBeGreaterThan(55_000);
    expect(await raw.pttl(redisLockNames('', 'fp:x:stolen').lock)).toBeLessThanOrEqual(5_000);
    expect(await raw.exists(redisLockNames('', 'fp:x:expired').lock)).toBe(0);
    expect(await raw.exists(redisLockNames('', 'fp:x:forced').lock)).toBe(0);
    expect(await backend.extendMany!([])).toEqual([]);
  });

  it('extendMany renews 2,500 leases with one script call per 1,000 (three EVALSHAs, one pipeline)', async () => {
    const { backend } = await start();
    const requests = Array.from({ length: 2_500 }, (_, i) => ({
      key: `fp:many:${i}`,
      token: token(),
      ttlMs: 5_000,
    }));
    for (let at = 0; at < requests.length; at += 100) {
      await Promise.all(requests.slice(at, at + 100).map((r) => backend.tryAcquire(r)));
    }
    await backend.extendMany!(requests.slice(0, 1)); // the node learns the script
    const before = await evalshaCalls(raw);
    const renewed = requests.map((r) => ({ ...r, ttlMs: 60_000 }));
    renewed[1_234] = { ...renewed[1_234], token: 'someone-else' };
    const results = await backend.extendMany!(renewed);
    expect(await evalshaCalls(raw)).toBe(before + 3);
    expect(results.filter((r) => r === true)).toHaveLength(2_499);
    expect(results[1_234]).toBe(false);
    expect(await raw.pttl(redisLockNames('', 'fp:many:2499').lock)).toBeGreaterThan(55_000);
    expect(await raw.pttl(redisLockNames('', 'fp:many:1234').lock)).toBeLessThanOrEqual(5_000);
  });

  it('counter names: tag slots match CRC16 (foo 12182, 123456789 0x31C3), and every bucket has its own counter', () => {
    expect(hashSlot('foo')).toBe(12_182);
    expect(hashSlot('123456789')).toBe(0x31c3 % 16_384);
    expect(fenceCounterName(12_182)).toBe('{foo}nestjs-distributed-lock:fence');
    const names = new Set(Array.from({ length: 16_384 }, (_, b) => fenceCounterName(b)));
    expect(names.size).toBe(16_384);
    for (const bucket of [0, 1, 4_095, 16_383]) {
      const tag = /^\{(.*)\}/.exec(fenceCounterName(bucket))![1];
      expect(hashSlot(tag)).toBe(bucket);
    }
    // Under a prefix: every name the module writes starts with it.
    const prefixed = new RedisKeyspace('app:');
    expect(prefixed.counter(12_182)).toBe('app:{foo}nestjs-distributed-lock:fence');
    expect(prefixed.names('app:k').lock).toMatch(/^app:\{[\w-]{11}\}k$/);
    expect(prefixed.channel('x')).toBe('app:nestjs-distributed-lock:waiters:x');
    expect(fenceBucket(12_182, 64)).toBe(12_182 % 64);
    expect(fenceBucket(12_182, null)).toBe(12_182);
  });
});
