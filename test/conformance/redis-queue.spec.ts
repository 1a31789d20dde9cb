import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Redis from 'ioredis';
import { redisLockNames } from '../support/redis-names';
import type { Lock, LockModuleOptions } from '../../lib';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { MACHINE_REDIS_URL, redisCommand, startRedisNode } from '../../servers/redis-servers';

// The Redis backend's FIFO wait queue, on the machine's Redis: waiters are served in arrival
// order (a release hands the lock to the first in line), a waiter that gives up leaves at
// once, and a crashed one holds up the others no longer than its short hand-over lease.
const url = MACHINE_REDIS_URL;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('redis wait queue', () => {
  const apps: LockTestApp[] = [];
  let raw: Redis;
  let keyPrefix: string;

  beforeAll(async () => {
    keyPrefix = `queue-${randomUUID().slice(0, 8)}:`;
    const options: LockModuleOptions = { backends: { r: { type: 'redis', url } }, keyPrefix };
    // Separate apps: separate clients and wake-up channels, as separate processes would have.
    for (let i = 0; i < 4; i++) apps.push(await createLockApp(options));
    raw = new Redis(url);
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    raw.disconnect();
  });

  it('grants in arrival order, each waiter woken by the release before it', async () => {
    const held = await apps[0].locks.acquire('fifo');
    const order: number[] = [];
    const waiters: Promise<Lock>[] = [];
    for (const i of [3, 1, 2]) {
      waiters.push(
        apps[i].locks.acquire('fifo', { waitTimeout: 10_000 }).then((lock) => {
          order.push(i);
          return lock;
        }),
      );
      await sleep(100); // arrival order is queue order
    }
    expect(await raw.zcard(redisLockNames(keyPrefix, 'fifo').queue)).toBe(3);
    await held.release();
    for (const waiter of waiters) {
      const lock = await waiter;
      const releasedAt = performance.now();
      await lock.release();
      expect(performance.now() - releasedAt).toBeLessThan(500);
    }
    expect(order).toEqual([3, 1, 2]);
    expect(await raw.zcard(redisLockNames(keyPrefix, 'fifo').queue)).toBe(0);
  });

  it.each([true, false])(
    'a lock handed over on a short lease is extended to the full ttl within a third of it (autoRenew %s)',
    async (autoRenew) => {
      const key = `topup-${autoRenew}`;
      const held = await apps[0].locks.acquire(key, { ttl: 20_000 });
      const waiter = apps[1].locks.acquire(key, { ttl: 20_000, waitTimeout: 10_000, autoRenew });
      await sleep(100);
      await held.release();
      const lock = await waiter;
      const lockKey = redisLockNames(keyPrefix, key).lock;
      expect(await raw.pttl(lockKey)).toBeLessThanOrEqual(3_000);
      const until = performance.now() + 2_000;
      while ((await raw.pttl(lockKey)) <= 3_000 && performance.now() < until) await sleep(10);
      expect(await raw.pttl(lockKey)).toBeGreaterThan(15_000);
      expect(lock.isHeld()).toBe(true);
      expect(lock.fence).toBeGreaterThan(held.fence!);
      await lock.release();
    },
  );

  it('a waiter that gives up leaves the queue, so the next one is not held up', async () => {
    const held = await apps[0].locks.acquire('leave');
    const impatient = apps[1].locks.acquire('leave', { waitTimeout: 300 });
    await expect(impatient).rejects.toMatchObject({ code: 'LOCK_NOT_ACQUIRED' });
    await sleep(50); // the leave is sent after the rejection
    expect(await raw.zcard(redisLockNames(keyPrefix, 'leave').queue)).toBe(0);
    const patient = apps[2].locks.acquire('leave', { waitTimeout: 10_000 });
    await sleep(100);
    const releasedAt = performance.now();
    await held.release();
    const lock = await patient;
    expect(performance.now() - releasedAt).toBeLessThan(500);
    await lock.release();
  });

  it('a waiter takes a lease that runs out (holder gone) within milliseconds, even when it last read PTTL 0', async () => {
    // Found by redis-semaphore's suite: a re-check landing in the lease's last millisecond read
    // PTTL 0, took it for "no hint" and slept a whole refresh period (750 ms with the default
    // ttl). The holder here never releases: its 100 ms lease runs out, as a crashed one's would.
    const backend = apps[0].manager.getBackend('r');
    const late: number[] = [];
    for (let round = 0; round < 20; round++) {
      const key = `expiry-${round}`;
      const grantedAt = performance.now();
      const grant = await backend.tryAcquire({
        key: keyPrefix + key,
        token: `crashed-${randomUUID()}`,
        ttlMs: 100,
      });
      expect(grant).not.toBeNull();
      const lock = await apps[1].locks.acquire(key, { waitTimeout: 5_000 });
      late.push(performance.now() - grantedAt - 100);
      await lock.release();
    }
    // Each one within a couple of round trips of the lease's end, none a refresh period late.
    expect(Math.max(...late)).toBeLessThan(150);
  });

  it('a waiter aborted by its signal is out of the queue when its call rejects', async () => {
    const held = await apps[0].locks.acquire('abort');
    const queue = redisLockNames(keyPrefix, 'abort').queue;
    const controller = new AbortController();
    const waiting = apps[1].locks
      .acquire('abort', { waitTimeout: 30_000, signal: controller.signal })
      .catch((e: unknown) => e);
    await sleep(100);
    expect(await raw.zcard(queue)).toBe(1);
    controller.abort();
    expect(await waiting).toMatchObject({ code: 'LOCK_ABORTED' });
    // Gone at once (not lapsing 3 s later), as seen by another client.
    expect(await raw.zcard(queue)).toBe(0);
    await held.release();
  });

  it('a crashed waiter at the head holds up a free lock only for its hand-over lease', async () => {
    const names = redisLockNames(keyPrefix, 'crashed');
    const [seconds, micros] = await raw.time();
    const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    // A waiter of a process that died: queued first, never refreshes, never leaves.
    // (Its queue entry: "<hand-over lease ms> <token> <channel>".)
    const ghost = `1500 ${randomUUID()} ${keyPrefix}nestjs-distributed-lock:waiters:dead`;
    await raw.zadd(names.queue, 1, ghost);
    await raw.zadd(names.waiters, serverNow + 1_500, ghost);
    await raw.set(names.arrivals, 1);
    expect(await apps[0].locks.tryAcquire('crashed')).toBeNull(); // reserved for the ghost
    const startedAt = performance.now();
    const lock = await apps[1].locks.acquire('crashed', { waitTimeout: 10_000 });
    const waited = performance.now() - startedAt;
    expect(waited).toBeGreaterThan(1_000);
    expect(waited).toBeLessThan(3_000);
    expect(await raw.zscore(names.queue, ghost)).toBeNull();
    await lock.release();
  });

  it('close() takes its waiters out of the queue', async () => {
    const app = await createLockApp({ backends: { r: { type: 'redis', url } }, keyPrefix });
    const held = await apps[0].locks.acquire('closing');
    const waiting = app.locks.acquire('closing', { waitTimeout: 10_000 }).catch((e: unknown) => e);
    await sleep(100);
    expect(await raw.zcard(redisLockNames(keyPrefix, 'closing').queue)).toBe(1);
    await app.close();
    // The wait is cancelled by the shutdown: not a store failure.
    expect(await waiting).toMatchObject({ code: 'LOCK_SHUTTING_DOWN' });
    expect(await raw.zcard(redisLockNames(keyPrefix, 'closing').queue)).toBe(0);
    await held.release();
  });

  it('waiters still get the lock when the ACL user may not SUBSCRIBE (they poll instead)', async () => {
    const node = await startRedisNode();
    // Keys and commands allowed, no pub/sub channel at all.
    await redisCommand(
      node.port,
      'ACL',
      'SETUSER',
      'nosub',
      'on',
      '>pw',
      '~*',
      'resetchannels',
      '+@all',
    );
    const options: LockModuleOptions = {
      backends: {
        r: { type: 'redis', url: `redis://nosub:pw@127.0.0.1:${node.port}`, restartGuard: false },
      },
    };
    const a = await createLockApp(options);
    const b = await createLockApp(options);
    try {
      const held = await a.locks.acquire('acl');
      const waiter = b.locks.acquire('acl', { waitTimeout: 5_000 });
      await sleep(300);
      const releasedAt = performance.now();
      await held.release();
      const lock = await waiter;
      expect(performance.now() - releasedAt).toBeLessThan(1_000);
      expect(lock.fence).toBeGreaterThan(held.fence!);
      await lock.release();
    } finally {
      await a.close();
      await b.close();
      await node.stop();
    }
  });
});
