import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { redisLockNames } from '../support/redis-names';
import { LockBackendError, LockLostError } from '../../lib/errors/lock.errors';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { expectTakeoverAfterSigkill } from '../support/holder-process';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import {
  MACHINE_REDIS_URL,
  redisCommand,
  startRedisNode,
  startRedisNodes,
  stopAll,
  type RedisNode,
} from '../../servers/redis-servers';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const now = () => performance.now();

afterAll(() => stopAll());

/** Runs `work` with two apps A and B on `node`, then closes both and stops the node. */
async function twoAppsOn(
  node: RedisNode,
  work: (a: LockTestApp, b: LockTestApp) => Promise<void>,
): Promise<void> {
  const options: LockModuleOptions = {
    backends: { r: { type: 'redis', url: node.url, restartGuard: false } },
  };
  const a = await createLockApp(options);
  const b = await createLockApp(options);
  try {
    await work(a, b);
  } finally {
    await a.close();
    await b.close();
    await node.stop();
  }
}

describe('redis faults', () => {
  it('a holder killed with SIGKILL blocks others for at most ttl + 1 s', async () => {
    const options: LockModuleOptions = {
      backends: { r: { type: 'redis', url: MACHINE_REDIS_URL } },
      keyPrefix: `kill-${randomUUID()}:`,
    };
    const ttl = 1_500;
    await expectTakeoverAfterSigkill(options, {
      ttl,
      waitTimeoutMs: ttl + 1_000,
      withinMs: ttl + 1_000,
    });
  }, 30_000);

  it('a key deleted behind the holder’s back aborts its signal within ttl/3 + 1 s', async () => {
    const keyPrefix = `del-${randomUUID()}:`;
    const t = await createLockApp({
      backends: { r: { type: 'redis', url: MACHINE_REDIS_URL } },
      keyPrefix,
    });
    const raw = new Redis(MACHINE_REDIS_URL);
    try {
      const ttl = 3_000;
      const lock = await t.locks.acquire('doomed', { ttl });
      const lost = new Promise<unknown>((resolve) =>
        lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)),
      );
      expect(await raw.del(redisLockNames(keyPrefix, 'doomed').lock)).toBe(1);
      const deletedAt = now();
      const reason = await lost;
      expect(now() - deletedAt).toBeLessThanOrEqual(ttl / 3 + 1_000);
      expect(reason).toBeInstanceOf(LockLostError);
      expect(lock.isHeld()).toBe(false);
    } finally {
      raw.disconnect();
      await t.close();
    }
  }, 30_000);

  it('a restart without persistence: the waiter fails at once naming the closed connection, the holder is told it lost the lock, the key is free again', async () => {
    const node = await startRedisNode();
    await twoAppsOn(node, async (a, b) => {
      const held = await a.locks.acquire('k', { ttl: 1_500 });
      const lost = new Promise<unknown>((resolve) =>
        held.signal.addEventListener('abort', () => resolve(held.signal.reason)),
      );
      const waiter = b.locks.acquire('k', { waitTimeout: 15_000 }).catch((e: unknown) => e);
      await sleep(200); // the waiter is subscribed and waiting
      const restarting = node.restart(); // comes back empty: the lock is gone
      const stoppedAt = now();
      // The store went away under the waiter: it fails at once, saying so, instead of waiting on.
      const error = await waiter;
      expect(now() - stoppedAt).toBeLessThan(1_000);
      expect(error).toBeInstanceOf(LockBackendError);
      expect((error as Error).message).toMatch(
        new RegExp(
          `not connected to 127\\.0\\.0\\.1:${node.port}: (the connection closed|connect ECONNREFUSED)`,
        ),
      );
      await restarting;
      // Known unsafe without persistence: A believes it holds until its next renewal.
      expect(await lost).toBeInstanceOf(LockLostError);
      expect(held.isHeld()).toBe(false);
      // Calls fail fast while the client is still reconnecting (by design): wait until it is back.
      const back = now() + 5_000;
      while ((await b.locks.health())['r']?.status !== 'up' && now() < back) await sleep(50);
      const lock = await b.locks.acquire('k', { waitTimeout: 5_000 });
      expect(lock.isHeld()).toBe(true);
      await lock.release();
    });
  }, 30_000);

  it('a restart with AOF persistence: the holder keeps the lock, the waiter in place fails at once, a new waiter is woken by the resubscribed channel', async () => {
    const node = await startRedisNode({
      extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'],
    });
    await twoAppsOn(node, async (a, b) => {
      const held = await a.locks.acquire('k', { ttl: 3_000 });
      const waiter = b.locks.acquire('k', { waitTimeout: 15_000 }).catch((e: unknown) => e);
      await sleep(200);
      await node.restart();
      // The waiter learnt of the restart (its connection closed) and failed with the reason.
      expect(await waiter).toMatchObject({
        code: 'LOCK_BACKEND',
        message: expect.stringContaining(`not connected to 127.0.0.1:${node.port}`),
      });
      await sleep(1_500); // both clients reconnect; A renews through the restart
      // B's subscriber connection subscribed its wake-up channel again on the restarted server
      // (A never waited, so it has none).
      const subscribers = async () =>
        (
          await redisCommand(node.port, 'PUBSUB', 'CHANNELS', 'nestjs-distributed-lock:waiters:*')
        ).split('\r\n')[0];
      const until = now() + 3_000;
      while ((await subscribers()) !== '*1' && now() < until) await sleep(50);
      expect(await subscribers()).toBe('*1');
      expect(held.isHeld()).toBe(true);
      expect(held.signal.aborted).toBe(false);
      const again = b.locks.acquire('k', { waitTimeout: 15_000 });
      await sleep(200);
      const releasedAt = now();
      await held.release();
      const lock = await again;
      expect(now() - releasedAt).toBeLessThan(1_500);
      expect(lock.fence).toBeGreaterThan(held.fence!);
      await lock.release();
    });
  }, 30_000);
});

describe('one renewal in flight per lease (redis-semaphore: "should not call _refresh if already refreshing")', () => {
  it('a renewal stuck behind a paused server past its bound holds back the next until it is answered', async () => {
    const node = await startRedisNode();
    const t = await createLockApp({
      backends: { r: { type: 'redis', url: node.url, restartGuard: false } },
      operationTimeout: 300,
    });
    try {
      const backend = t.manager.getBackend('r');
      const extendMany = backend.extendMany!.bind(backend);
      let inFlight = 0;
      let most = 0;
      let sent = 0;
      backend.extendMany = async (requests) => {
        sent++;
        most = Math.max(most, ++inFlight);
        try {
          return await extendMany(requests);
        } finally {
          inFlight--;
        }
      };
      const lock = await t.locks.acquire('stuck', { ttl: 3_000 }); // renewed after ~1 s
      await sleep(800);
      process.kill(node.pid()!, 'SIGSTOP');
      try {
        // The renewal at ~1 s waits on the paused server; its 300 ms bound passes and a retry
        // comes due (a third of what is left of the lease) well within the pause.
        await sleep(1_500);
        expect(sent).toBe(1);
      } finally {
        process.kill(node.pid()!, 'SIGCONT');
      }
      const until = now() + 2_000;
      while (sent < 2 && now() < until) await sleep(20);
      expect(sent).toBe(2); // the retry went out once the stuck one was answered
      expect(most).toBe(1);
      expect(lock.isHeld()).toBe(true);
      await lock.release();
    } finally {
      await t.close();
      await node.stop();
    }
  }, 30_000);
});

describe('redlock faults', () => {
  it('grants with 1 of 3 nodes down; with 2 of 3 down fails fast with a clear error and never grants', async () => {
    const nodes = await startRedisNodes(3);
    const t = await createLockApp({
      backends: {
        q: {
          type: 'redlock',
          urls: nodes.map((n) => n.url),
          nodeTimeout: 500,
          restartGuard: false,
        },
      },
    });
    try {
      await nodes[0].stop();
      const one = await t.locks.acquire('q1', { waitTimeout: 2_000 });
      expect(one.isHeld()).toBe(true);
      expect(typeof one.fence).toBe('number');
      await one.release();

      await nodes[1].stop();
      const started = now();
      const err = await t.locks.acquire('q2', { waitTimeout: 10_000 }).catch((e: unknown) => e);
      expect(now() - started).toBeLessThan(3_000);
      expect(err).toBeInstanceOf(LockBackendError);
      expect(String((err as Error).message)).toMatch(/no quorum, 1 of 3 nodes/);
      // The surviving node holds no lock entry for it: nothing was granted.
      const lockKey = redisLockNames('', 'q2').lock;
      expect(await redisCommand(nodes[2].port, 'EXISTS', lockKey)).toBe(':0\r\n');
      await expect(t.locks.isLocked('q2')).rejects.toBeInstanceOf(LockBackendError);
    } finally {
      await t.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }, 30_000);
});

describe('redlock renewal and answers (found by redis-semaphore and node-redlock suites)', () => {
  it('a node restarted empty under a held lock gets its copy back at the next renewal, so losing another node later keeps the lock', async () => {
    const nodes = await startRedisNodes(3);
    const options: LockModuleOptions = {
      backends: {
        q: {
          type: 'redlock',
          urls: nodes.map((n) => n.url),
          nodeTimeout: 500,
          restartGuard: false,
        },
      },
    };
    const t = await createLockApp(options);
    const other = await createLockApp(options);
    try {
      const lock = await t.locks.acquire('repair', { ttl: 1_500 }); // renewed every ~0.5 s
      const lockKey = redisLockNames('', 'repair').lock;
      const copyOn = async (node: RedisNode) =>
        (await redisCommand(node.port, 'GET', lockKey)).includes(lock.token);
      expect(await copyOn(nodes[0])).toBe(true);
      await nodes[0].restart('SIGKILL'); // back, empty: its copy is gone
      expect(await copyOn(nodes[0])).toBe(false);
      const until = now() + 3_000;
      while (!(await copyOn(nodes[0])) && now() < until) await sleep(50);
      expect(await copyOn(nodes[0])).toBe(true); // put back by a renewal
      await nodes[1].stop('SIGKILL');
      await sleep(2_000); // several renewals on nodes 0 and 2 alone
      expect(lock.isHeld()).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      expect(await other.locks.tryAcquire('repair')).toBeNull();
      await lock.release();
      expect(await copyOn(nodes[0])).toBe(false);
    } finally {
      await t.close();
      await other.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }, 30_000);

  it('a key holding what the module did not write on the nodes: refused, named, never overwritten; a held lock whose key is overwritten so is lost', async () => {
    const nodes = await startRedisNodes(3);
    const t = await createLockApp({
      backends: {
        q: {
          type: 'redlock',
          urls: nodes.map((n) => n.url),
          nodeTimeout: 500,
          restartGuard: false,
        },
      },
    });
    try {
      const lockKey = redisLockNames('', 'typed').lock;
      for (const node of nodes) {
        expect(await redisCommand(node.port, 'HSET', lockKey, 'field', 'value')).toBe(':1\r\n');
      }
      const error = await t.locks.tryAcquire('typed').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBackendError);
      const message = (error as Error).message;
      expect(message).toContain(`"${lockKey}"`);
      expect(message).toMatch(/holds a hash this module did not write/);
      expect(message).not.toMatch(/reachable|down:/);
      for (const node of nodes) {
        expect(await redisCommand(node.port, 'HGET', lockKey, 'field')).toBe('$5\r\nvalue\r\n');
      }
      // A held lock whose key is overwritten with another type: no longer ours, so lost.
      const other = redisLockNames('', 'typed-later').lock;
      const lock = await t.locks.acquire('typed-later', { autoRenew: false });
      for (const node of nodes) await redisCommand(node.port, 'DEL', other);
      for (const node of nodes) await redisCommand(node.port, 'RPUSH', other, 'x');
      await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
      expect(lock.signal.aborted).toBe(true);
      for (const node of nodes) expect(await redisCommand(node.port, 'LLEN', other)).toBe(':1\r\n');
    } finally {
      await t.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }, 30_000);
});
