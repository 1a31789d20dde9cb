import { afterAll, describe, expect, it } from '@jest/globals';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import type { Lock } from '../../lib';
import { createLockApp } from '../support/lock-app';
import { redisLockNames } from '../support/redis-names';
import {
  redisCommand,
  startRedisNode,
  startRedisNodes,
  stopAll,
  type RedisNode,
} from '../../servers/redis-servers';
import { startTcpProxy } from '../../servers/tcp-proxy';

// The restart guard: a node restarted without its data has forgotten the locks it granted, while
// their holders still believe they hold them. Until it has been up for longer than any lease, a
// single Redis grants nothing and a Redlock node's vote does not count; with the guard off, the
// same restart hands the lock to a second holder while the first still believes it holds it.
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const now = () => performance.now();

afterAll(() => stopAll());

/** Waits until `node` has been up for `ms` (by its own uptime, whole seconds). */
async function upFor(node: RedisNode, ms: number): Promise<void> {
  const uptime = async (): Promise<number> =>
    Number(/uptime_in_seconds:(\d+)/.exec(await redisCommand(node.port, 'INFO', 'server'))![1]);
  while ((await uptime()) * 1_000 < ms) await sleep(100);
}

/**
 * Holder A takes `key` on `config`, the store is restarted empty, and B asks for the key at
 * once and waits: when B got it (ms after the restart), and whether A still believed it held it
 * at that moment.
 */
async function afterEmptyRestart(
  config: LockBackendConfig,
  restart: () => Promise<void>,
  key: string,
  ttl: number,
): Promise<{ grantedAfterMs: number; holderBelieved: boolean; b: Lock }> {
  const a = await createLockApp({ backends: { r: config } });
  const b = await createLockApp({ backends: { r: config } });
  try {
    const held = await a.locks.acquire(key, { ttl });
    const restartedAt = now();
    await restart();
    let granted: Lock | undefined;
    while (!granted) {
      granted = (await b.locks.tryAcquire(key, { ttl }).catch(() => null)) ?? undefined;
      if (!granted) await sleep(20);
    }
    const grantedAfterMs = now() - restartedAt;
    const holderBelieved = held.isHeld();
    await granted.release();
    await held.release().catch(() => undefined);
    return { grantedAfterMs, holderBelieved, b: granted };
  } finally {
    await a.close();
    await b.close();
  }
}

describe('restart guard: a single Redis without persistence', () => {
  it('restarted empty under a holder, it grants nothing until it has been up for the guard: no second holder while the first believes it holds', async () => {
    const node = await startRedisNode();
    try {
      await upFor(node, 2_000);
      const config: LockBackendConfig = { type: 'redis', url: node.url, restartGuard: 1_500 };
      const result = await afterEmptyRestart(config, () => node.restart('SIGKILL'), 'g', 1_500);
      expect(result.holderBelieved).toBe(false);
      // The node's start is read in whole seconds, taken as late as it could be.
      expect(result.grantedAfterMs).toBeGreaterThanOrEqual(1_500);
      expect(result.grantedAfterMs).toBeLessThan(4_000);
    } finally {
      await node.stop();
    }
  }, 30_000);

  it('with restartGuard: false the same restart hands the lock over at once, while the first holder still believes it holds it', async () => {
    const node = await startRedisNode();
    try {
      const config: LockBackendConfig = { type: 'redis', url: node.url, restartGuard: false };
      const result = await afterEmptyRestart(config, () => node.restart('SIGKILL'), 'g', 3_000);
      expect(result.holderBelieved).toBe(true);
      expect(result.grantedAfterMs).toBeLessThan(1_000);
    } finally {
      await node.stop();
    }
  }, 30_000);

  it('a lock asking for a longer ttl than the guard raises it; a fresh node waits it out, and acquire waits rather than fails', async () => {
    const node = await startRedisNode();
    const t = await createLockApp({
      backends: { r: { type: 'redis', url: node.url, restartGuard: 500 } },
    });
    try {
      await upFor(node, 1_000);
      const first = await t.locks.acquire('long', { ttl: 2_500 }); // the guard is now 2.5 s
      await first.release();
      await node.restart('SIGKILL');
      // The client reconnects (calls fail fast meanwhile), then the node is busy for the guard.
      while ((await t.locks.health())['r']?.status !== 'up') await sleep(20);
      expect(await t.locks.tryAcquire('long', { ttl: 2_500 })).toBeNull();
      const startedAt = now();
      const lock = await t.locks.acquire('long', { ttl: 2_500, waitTimeout: 10_000 });
      expect(now() - startedAt).toBeGreaterThan(1_000);
      expect(lock.isHeld()).toBe(true);
      await lock.release();
    } finally {
      await t.close();
      await node.stop();
    }
  }, 30_000);

  it('a user who may not run INFO is not guarded: locks work at once, with a warning', async () => {
    const node = await startRedisNode();
    try {
      const acl = ['ACL', 'SETUSER', 'noinfo', 'on', '>pw', '~*', '&*', '+@all', '-info'];
      expect(await redisCommand(node.port, ...acl)).toBe('+OK\r\n');
      const t = await createLockApp({
        backends: {
          r: {
            type: 'redis',
            url: `redis://noinfo:pw@127.0.0.1:${node.port}`,
            restartGuard: 60_000,
          },
        },
      });
      try {
        const lock = await t.locks.acquire('k', { waitTimeout: 0 });
        expect(lock.isHeld()).toBe(true);
        await lock.release();
      } finally {
        await t.close();
      }
    } finally {
      await node.stop();
    }
  }, 30_000);
});

describe('restart guard: Redlock', () => {
  /**
   * A reaches node 3 through a black-holed proxy, so its lock rests on nodes 1 and 2 only (a
   * bare quorum); then node 2 is restarted empty. B, reaching every node, would be granted the
   * lock on nodes 2 and 3: a second holder while A still believes it holds it.
   */
  async function bareQuorum(restartGuard: number | false): Promise<{ holderBelieved: boolean }> {
    const nodes: RedisNode[] = await startRedisNodes(3);
    const proxy = await startTcpProxy(nodes[2].port);
    try {
      if (restartGuard !== false) await Promise.all(nodes.map((n) => upFor(n, restartGuard)));
      const options = (urls: string[]): LockBackendConfig => ({
        type: 'redlock',
        urls,
        nodeTimeout: 300,
        restartGuard,
      });
      const a = await createLockApp({
        backends: { r: options([nodes[0].url, nodes[1].url, `redis://127.0.0.1:${proxy.port}`]) },
      });
      const b = await createLockApp({ backends: { r: options(nodes.map((n) => n.url)) } });
      try {
        proxy.blackhole(true);
        const held = await a.locks.acquire('bare', { ttl: 2_000 });
        const name = redisLockNames('', 'bare').lock;
        expect(await redisCommand(nodes[2].port, 'EXISTS', name)).toBe(':0\r\n');
        await nodes[1].restart('SIGKILL');
        let granted: Lock | null = null;
        while (!granted) {
          granted = await b.locks.tryAcquire('bare', { ttl: 2_000 }).catch(() => null);
          if (!granted) await sleep(20);
        }
        const holderBelieved = held.isHeld();
        await granted.release();
        await held.release().catch(() => undefined);
        return { holderBelieved };
      } finally {
        proxy.blackhole(false);
        await a.close();
        await b.close();
      }
    } finally {
      await proxy.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }

  it('a node restarted empty under a bare quorum does not count until it has been up for the guard: no second holder', async () => {
    const result = await bareQuorum(2_000);
    // A lost the lock at its next renewal (and gave its copy back): only then was B granted.
    expect(result.holderBelieved).toBe(false);
  }, 60_000);

  it('with restartGuard: false the restarted node votes at once, and a second holder is granted while the first believes it holds', async () => {
    const result = await bareQuorum(false);
    expect(result.holderBelieved).toBe(true);
  }, 60_000);
});
