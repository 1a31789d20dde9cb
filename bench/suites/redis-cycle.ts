import { randomUUID } from 'node:crypto';
import Redlock from 'redlock';
import { createLock, IoredisAdapter } from 'redlock-universal';
import { Mutex } from 'redis-semaphore';
import { cycleTable } from '../harness/cycle-table';
import { compareInterleaved, pairedRatio, type Variant } from '../harness/rounds';
import { startLocks } from '../harness/nest-locks';
import type { Profile } from '../harness/profile';
import { target, type ChartPoint, type SuiteResult } from '../harness/result';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { redisClient } from '../harness/redis-client';

/** Compare-and-delete: the raw floor's release (what every correct Redis lock must send). */
const COMPARE_AND_DELETE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;

/** A cycle variant with where its bar goes on the chart. */
interface ChartedVariant extends Variant {
  /** Bar label (short: the table has the settings). */
  bar: string;
  group: ChartPoint['group'];
}

/**
 * Issue 8, item 1: one client acquiring and releasing a free key on Redis, back to back.
 * The floor is the least a correct lock can send: `SET NX PX` and a compare-and-delete script
 * (two round trips, no fencing). The peers run with their default settings, all on one ioredis
 * client; ours runs once on an ioredis client and once on a node-redis one, each made by the
 * module from the same URL, so the two differ only in the client library.
 */
export async function redisCycleSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const raw = redisClient();
  raw.defineCommand('compareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
  const peerClient = redisClient();
  const ours = await startLocks({
    backends: { redis: { type: 'redis', url: MACHINE_REDIS_URL, driver: 'ioredis' } },
  });
  const oursNodeRedis = await startLocks({
    backends: { redis: { type: 'redis', url: MACHINE_REDIS_URL, driver: 'redis' } },
  });
  const redlock = new Redlock([peerClient]);
  const run = randomUUID().slice(0, 8);
  const semaphoreKey = `bench:semaphore:${run}`;
  // One lock object per resource, reused, as its README shows: a new one per cycle would also
  // PING on its first acquire (its circuit breaker's health check, then every 30 s).
  const universal = createLock({
    adapter: new IoredisAdapter(peerClient),
    key: `bench:redlock-universal:${run}`,
  });
  try {
    const variants: ChartedVariant[] = [
      {
        name: 'raw floor (SET NX PX + EVALSHA)',
        bar: 'raw floor',
        group: 'floor',
        op: async () => {
          const token = randomUUID();
          if ((await raw.set(`bench:floor:${run}`, token, 'PX', 30_000, 'NX')) !== 'OK')
            throw new Error('floor: key busy');
          const cad = (raw as unknown as Record<string, (k: string, t: string) => Promise<number>>)
            .compareAndDelete;
          if ((await cad.call(raw, `bench:floor:${run}`, token)) !== 1)
            throw new Error('floor: lost');
        },
      },
      {
        name: 'ours (ioredis client)',
        bar: 'ours (ioredis)',
        group: 'ours',
        op: async () => {
          const lock = await ours.locks.acquire(`bench:ours:${run}`);
          await lock.release();
        },
      },
      {
        name: 'ours (node-redis 5 client)',
        bar: 'ours (node-redis)',
        group: 'ours',
        op: async () => {
          const lock = await oursNodeRedis.locks.acquire(`bench:ours-node-redis:${run}`);
          await lock.release();
        },
      },
      {
        name: 'redlock 4.2.0 (1 node)',
        bar: 'redlock',
        group: 'peer',
        op: async () => {
          const lock = await redlock.lock(`bench:redlock:${run}`, 30_000);
          await lock.unlock();
        },
      },
      {
        name: 'redlock-universal 0.8.5 (createLock, one node)',
        bar: 'redlock-universal',
        group: 'peer',
        op: async () => {
          const handle = await universal.acquire();
          if (!(await universal.release(handle))) throw new Error('redlock-universal: lost');
        },
      },
      {
        name: 'redis-semaphore 5.8.0 Mutex',
        bar: 'redis-semaphore',
        group: 'peer',
        op: async () => {
          const mutex = new Mutex(peerClient, semaphoreKey);
          await mutex.acquire();
          await mutex.release();
        },
      },
    ];
    const results = await compareInterleaved(variants, profile);
    const [floor, ourResult, nodeRedisResult, redlockResult, universalResult, semaphoreResult] =
      results;
    const ratio = (
      id: string,
      label: string,
      other: (typeof results)[number],
      goal: number,
      mine = ourResult,
    ) => target(id, `Uncontended Redis cycle: ${label}`, pairedRatio(mine, other), '>=', goal, 'x');
    return {
      id: 'redis-cycle',
      title: 'Uncontended acquire + release, one Redis client',
      tables: [
        cycleTable(
          'Uncontended cycle on Redis (one client, free key)',
          results,
          ourResult,
          'Medians of interleaved rounds; "ours ÷ this" is ours on ioredis over this, the median ' +
            'of per-round ratios. Ours is LockService.acquire + release, and also draws a fencing ' +
            'token (the server time and a SET ... GET of a counter, in the acquire script), ' +
            'checks the wait queue and arms a renewal watchdog; both of ours are ' +
            'made by the module from the same URL, with ioredis 5 or node-redis 5. The peers ' +
            'share one ioredis client, with their default settings; redlock-universal is its ' +
            'single-node lock (createLock, SET NX PX + a compare-and-delete script), one lock ' +
            'object reused for every cycle.',
        ),
      ],
      targets: [
        ratio('redis-cycle-floor', 'ours ÷ raw floor', floor, 0.9),
        ratio('redis-cycle-redlock', 'ours ÷ redlock', redlockResult, 1),
        ratio('redis-cycle-redlock-universal', 'ours ÷ redlock-universal', universalResult, 1),
        ratio('redis-cycle-semaphore', 'ours ÷ redis-semaphore', semaphoreResult, 0.95),
        ratio(
          'redis-cycle-node-redis',
          'ours on node-redis ÷ ours on ioredis',
          ourResult,
          0.9,
          nodeRedisResult,
        ),
      ],
      charts: [
        {
          id: 'redis-cycle',
          title: 'Uncontended Redis acquire + release (cycles/s, higher is better)',
          valueTitle: 'cycles/s',
          points: results.map((r, i) => ({
            label: variants[i].bar,
            group: variants[i].group,
            value: Math.round(r.opsPerSec),
          })),
        },
      ],
      data: { results },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await ours.close();
    await oursNodeRedis.close();
    raw.disconnect();
    peerClient.disconnect();
  }
}
