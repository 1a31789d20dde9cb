import { randomUUID } from 'node:crypto';
import Redlock from 'redlock';
import { Mutex } from 'redis-semaphore';
import { cycleTable } from '../harness/cycle-table';
import { compareInterleaved, pairedRatio, type Variant } from '../harness/rounds';
import { startLocks } from '../harness/nest-locks';
import type { Profile } from '../harness/profile';
import { target, type SuiteResult } from '../harness/result';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { redisClient } from '../harness/redis-client';

/** Compare-and-delete: the raw floor's release (what every correct Redis lock must send). */
const COMPARE_AND_DELETE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;

/**
 * Issue 8, item 1: one client acquiring and releasing a free key on Redis, back to back.
 * The floor is the least a correct lock can send: `SET NX PX` and a compare-and-delete script
 * (two round trips, no fencing). The peers run with their default settings.
 */
export async function redisCycleSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const raw = redisClient();
  raw.defineCommand('compareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
  const peerClient = redisClient();
  const ours = await startLocks({ backends: { redis: { type: 'redis', url: MACHINE_REDIS_URL } } });
  const redlock = new Redlock([peerClient]);
  const run = randomUUID().slice(0, 8);
  const semaphoreKey = `bench:semaphore:${run}`;
  try {
    const variants: Variant[] = [
      {
        name: 'raw floor (SET NX PX + EVALSHA)',
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
        name: 'ours (LockService.acquire + release)',
        op: async () => {
          const lock = await ours.locks.acquire(`bench:ours:${run}`);
          await lock.release();
        },
      },
      {
        name: 'redlock 4.2.0 (1 node)',
        op: async () => {
          const lock = await redlock.lock(`bench:redlock:${run}`, 30_000);
          await lock.unlock();
        },
      },
      {
        name: 'redis-semaphore 5.8.0 Mutex',
        op: async () => {
          const mutex = new Mutex(peerClient, semaphoreKey);
          await mutex.acquire();
          await mutex.release();
        },
      },
    ];
    const results = await compareInterleaved(variants, profile);
    const [floor, ourResult, redlockResult, semaphoreResult] = results;
    const vsFloor = pairedRatio(ourResult, floor);
    const vsRedlock = pairedRatio(ourResult, redlockResult);
    const vsSemaphore = pairedRatio(ourResult, semaphoreResult);
    return {
      id: 'redis-cycle',
      title: 'Uncontended acquire + release, one Redis client',
      tables: [
        cycleTable(
          'Uncontended cycle on Redis (one client, free key)',
          results,
          ourResult,
          'Medians of interleaved rounds; "ours ÷ this" is the median of per-round ratios. ' +
            'Ours also takes a fencing token (INCR in the acquire script) and arms a renewal watchdog.',
        ),
      ],
      targets: [
        target(
          'redis-cycle-floor',
          'Uncontended Redis cycle: ours ÷ raw floor',
          vsFloor,
          '>=',
          0.9,
          'x',
        ),
        target(
          'redis-cycle-redlock',
          'Uncontended Redis cycle: ours ÷ redlock',
          vsRedlock,
          '>=',
          1,
          'x',
        ),
        target(
          'redis-cycle-semaphore',
          'Uncontended Redis cycle: ours ÷ redis-semaphore',
          vsSemaphore,
          '>=',
          1,
          'x',
        ),
      ],
      charts: [
        {
          id: 'redis-cycle',
          title: 'Uncontended Redis acquire + release (cycles/s, higher is better)',
          valueTitle: 'cycles/s',
          points: results.map((r, i) => ({
            label: ['raw floor', 'ours', 'redlock', 'redis-semaphore'][i],
            group: i === 0 ? 'floor' : i === 1 ? 'ours' : 'peer',
            value: Math.round(r.opsPerSec),
          })),
        },
      ],
      data: { results },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await ours.close();
    raw.disconnect();
    peerClient.disconnect();
  }
}
