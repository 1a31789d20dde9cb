import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import Redis from 'ioredis';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import type { LockModuleOptions } from '../../lib';
import { redisLockNames } from '../support/redis-names';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import {
  bucketMates,
  evalshaCalls,
  fencesWithMatesBetween,
  footprint,
  lockAndRelease,
  ownerToken as token,
} from '../support/fence-footprint';
import { startRedisNodes, type RedisNode } from '../../servers/redis-servers';

// Redlock over three redis-server processes of its own: each node keeps at most `fenceBuckets`
// counters; the two-round fencing stays sound with shared counters (each key's fences rise
// strictly, the holder's fence is tagged on its copies); extendMany renews a batch with one
// script call per node and applies the quorum rule of extend per lease.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('redlock: fence buckets per node and extendMany', () => {
  let nodes: RedisNode[];
  let raws: Redis[];
  const apps: LockTestApp[] = [];

  async function start(fenceBuckets?: number): Promise<LockBackend> {
    const options: LockModuleOptions = {
      backends: {
        q: {
          type: 'redlock',
          urls: nodes.map((n) => n.url),
          restartGuard: false,
          ...(fenceBuckets ? { fenceBuckets } : {}),
        },
      },
    };
    const app = await createLockApp(options);
    apps.push(app);
    return app.manager.getBackend('q');
  }

  beforeAll(async () => {
    nodes = await startRedisNodes(3);
    raws = nodes.map((n) => new Redis(n.url));
  });
  beforeEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await Promise.all(raws.map((r) => r.flushall()));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    for (const r of raws ?? []) r.disconnect();
    await Promise.all((nodes ?? []).map((n) => n.stop()));
  });

  it('2,000 distinct keys locked and released leave at most fenceBuckets (64) counters per node', async () => {
    const backend = await start(64);
    await lockAndRelease(
      backend,
      Array.from({ length: 2_000 }, (_, i) => `rfp:${i}`),
    );
    for (const raw of raws) {
      const left = await footprint(raw);
      expect(left.others).toEqual([]);
      expect(left.counters.length).toBeLessThanOrEqual(64);
      expect(left.counters.length).toBeGreaterThan(50);
    }
  });

  it("a key's fences rise strictly with its bucket shared; the holder's fence is tagged on its copies", async () => {
    const backend = await start(64);
    const key = 'rfp:mine';
    const mates = bucketMates(key, 'rfp:mate:', 10, 64);
    const { mine } = await fencesWithMatesBetween(backend, key, mates, 30);
    for (let i = 1; i < mine.length; i++) expect(mine[i]).toBeGreaterThan(mine[i - 1]);
    const t = token();
    const held = await backend.tryAcquire({ key, token: t, ttlMs: 10_000 });
    for (const raw of raws) {
      expect(await raw.get(redisLockNames('', key).lock)).toBe(`${t} ${held!.fence}`);
    }
    await lockAndRelease(backend, mates, 5);
    expect(await backend.inspect!(key)).toMatchObject({ held: true, fence: held!.fence });
    // A tagged copy is still ours: extend and release compare the token part.
    expect(await backend.extend(key, t, 20_000)).toBe(true);
    expect(await backend.release(key, t)).toBe(true);
    for (const raw of raws) expect(await raw.exists(redisLockNames('', key).lock)).toBe(0);
    const free = await backend.inspect!(key);
    expect(free).toMatchObject({ held: false });
    expect(free.fence!).toBeGreaterThan(held!.fence!);
  });

  it('instances on different fenceBuckets side by side: a key keeps its fences rising', async () => {
    const on64 = await start(64);
    const on256 = await start(256);
    const fences: number[] = [];
    for (let round = 0; round < 10; round++) {
      const granted = await lockAndRelease(round % 2 === 0 ? on64 : on256, ['rfp:move']);
      fences.push(granted.get('rfp:move')!);
    }
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
  });

  it('extendMany: a mixed batch renews only ours, by quorum, with one script call per node per 1,000 leases', async () => {
    const backend = await start();
    // Long enough that taking all 1,500 on a loaded machine (seconds, in CI) expires none: the
    // case is about ownership and batching (the expired lease below is the one that ran out),
    // and renewing to 60 s shows on the keys (above the 30 s they were taken with).
    const held = Array.from({ length: 1_500 }, (_, i) => ({
      key: `rfp:x:${i}`,
      token: token(),
      ttlMs: 30_000,
    }));
    for (let at = 0; at < held.length; at += 100) {
      await Promise.all(held.slice(at, at + 100).map((r) => backend.tryAcquire(r)));
    }
    const expired = { key: 'rfp:x:expired', token: token(), ttlMs: 50 };
    const stolen = { key: 'rfp:x:stolen', token: token(), ttlMs: 50 };
    const forced = { key: 'rfp:x:forced', token: token(), ttlMs: 5_000 };
    for (const r of [expired, stolen, forced]) expect(await backend.tryAcquire(r)).not.toBeNull();
    await sleep(100);
    await backend.tryAcquire({ key: stolen.key, token: token(), ttlMs: 5_000 });
    await backend.forceRelease!(forced.key);
    await backend.extendMany!(held.slice(0, 1)); // every node learns the script
    const before = await Promise.all(raws.map(evalshaCalls));
    const results = await backend.extendMany!([
      ...held.map((r) => ({ ...r, ttlMs: 60_000 })),
      { ...expired, ttlMs: 60_000 },
      { ...stolen, ttlMs: 60_000 },
      { ...forced, ttlMs: 60_000 },
    ]);
    expect(results).toEqual([...held.map(() => true), false, false, false]);
    const after = await Promise.all(raws.map(evalshaCalls));
    expect(after.map((calls, i) => calls - before[i])).toEqual([2, 2, 2]);
    for (const raw of raws) {
      expect(await raw.pttl(redisLockNames('', 'rfp:x:7').lock)).toBeGreaterThan(55_000);
      expect(await raw.pttl(redisLockNames('', stolen.key).lock)).toBeLessThanOrEqual(5_000);
    }
  });

  it('extendMany: copies a node lost are put back (with the fence) once a quorum renewed; a lease whose key holds what the module did not write is lost alone', async () => {
    const backend = await start();
    const leases = ['rfp:y:a', 'rfp:y:b', 'rfp:y:c'].map((key) => ({
      key,
      token: token(),
      ttlMs: 10_000,
    }));
    const fences: number[] = [];
    for (const r of leases) fences.push((await backend.tryAcquire(r))!.fence!);
    // Node 0 lost its copies (restarted empty); lease c's key is of another type on 1 and 2.
    await raws[0].del(...leases.map((r) => redisLockNames('', r.key).lock));
    for (const raw of raws.slice(1)) {
      await raw.del(redisLockNames('', 'rfp:y:c').lock);
      await raw.hset(redisLockNames('', 'rfp:y:c').lock, 'x', '1');
    }
    const results = await backend.extendMany!(leases.map((r) => ({ ...r, ttlMs: 30_000 })));
    expect(results).toEqual([true, true, false]);
    for (const raw of raws.slice(1)) {
      expect(await raw.hget(redisLockNames('', 'rfp:y:c').lock, 'x')).toBe('1');
    }
    for (const [i, r] of leases.slice(0, 2).entries()) {
      expect(await raws[0].get(redisLockNames('', r.key).lock)).toBe(`${r.token} ${fences[i]}`);
      expect(await raws[0].pttl(redisLockNames('', r.key).lock)).toBeGreaterThan(25_000);
    }
    // A node that does not answer counts against the quorum, for every lease.
    await nodes[2].stop();
    try {
      const down = await backend.extendMany!(leases.slice(0, 2));
      expect(down).toEqual([true, true]);
      await nodes[1].stop();
      await expect(backend.extendMany!(leases.slice(0, 2))).rejects.toThrow(/no quorum/);
    } finally {
      await nodes[1].restart();
      await nodes[2].restart();
      raws.forEach((raw) => raw.disconnect());
      raws = nodes.map((n) => new Redis(n.url));
    }
  });
});
