import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LockLostError } from '../../lib/errors/lock.errors';
import type { Lock } from '../../lib/lock.interfaces';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { checkHistory, HistoryRecorder, readHistory } from '../support/history';
import { expectTakeoverAfterSigkill } from '../support/holder-process';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { startTcpProxy, type TcpProxy } from '../../servers/tcp-proxy';
import { startZkEnsemble, startZkStandalone, stopAllZk } from '../../servers/zk-servers';

const SESSION_MS = 3_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const now = () => performance.now();
const zkOptions = (connectionString: string): LockModuleOptions => ({
  backends: { zk: { type: 'zookeeper', connectionString, sessionTimeout: SESSION_MS } },
});

afterAll(() => stopAllZk());

/**
 * Runs `work` with app `t` reaching a fresh standalone server through a fault-injecting proxy,
 * then checks that nothing was left behind: app `other`, connected directly, gets `key` within
 * `waitTimeoutMs` and, once it releases it, nothing holds it. Closes all of it in any case.
 */
async function throughProxy(
  key: string,
  waitTimeoutMs: number,
  work: (proxy: TcpProxy, t: LockTestApp) => Promise<void>,
): Promise<void> {
  const zk = await startZkStandalone();
  const proxy = await startTcpProxy(zk.clientPort);
  const t = await createLockApp(zkOptions(proxy.address));
  const other = await createLockApp(zkOptions(zk.connectString));
  try {
    await work(proxy, t);
    const next = await other.locks.acquire(key, { waitTimeout: waitTimeoutMs });
    await next.release();
    expect(await other.locks.isLocked(key)).toBe(false);
  } finally {
    proxy.onClientData(null);
    await t.close();
    await other.close();
    await proxy.close();
    await zk.destroy();
  }
}

describe('zookeeper faults', () => {
  it('a holder killed with SIGKILL: a waiter acquires within sessionTimeout + 1 s', async () => {
    const zk = await startZkStandalone();
    try {
      await expectTakeoverAfterSigkill(zkOptions(zk.connectString), {
        ttl: 30_000,
        waitTimeoutMs: SESSION_MS + 5_000,
        withinMs: SESSION_MS + 1_000,
      });
    } finally {
      await zk.destroy();
    }
  }, 60_000);

  it('SIGSTOP of the server: the holder’s signal aborts within sessionTimeout + 1 s, before anyone else is granted', async () => {
    const zk = await startZkStandalone();
    const a = await createLockApp(zkOptions(zk.connectString));
    const b = await createLockApp(zkOptions(zk.connectString));
    try {
      const held = await a.locks.acquire('frozen');
      let abortedAt = Infinity;
      held.signal.addEventListener('abort', () => (abortedAt = now()));
      let grantedAt = Infinity;
      const waiter = b.locks.acquire('frozen', { waitTimeout: 30_000 }).then((l) => {
        grantedAt = now();
        return l;
      });
      await sleep(300); // B is queued behind A
      await zk.pause();
      const pausedAt = now();
      await sleep(SESSION_MS + 1_500);
      expect(abortedAt - pausedAt).toBeLessThanOrEqual(SESSION_MS + 1_000);
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      expect(held.isHeld()).toBe(false);
      zk.resume();
      const lock = await waiter;
      expect(grantedAt).toBeGreaterThan(abortedAt);
      await lock.release();
    } finally {
      zk.resume();
      await a.close();
      await b.close();
      await zk.destroy();
    }
  }, 60_000);

  it('ensemble leader killed while locks are held and waiters queue: never two holders; the queue proceeds', async () => {
    const ensemble = await startZkEnsemble(3);
    const dir = mkdtempSync(join(tmpdir(), 'zk-leader-'));
    const apps: LockTestApp[] = [];
    try {
      for (let i = 0; i < 4; i++)
        apps.push(
          await createLockApp({
            backends: {
              zk: {
                type: 'zookeeper',
                connectionString: ensemble.connectString,
                sessionTimeout: 6_000,
              },
            },
          }),
        );
      let stop = false;
      let sections = 0;
      const files = apps.map((_, i) => join(dir, `w${i}.jsonl`));
      const workers = apps.map(async (app, i) => {
        const rec = new HistoryRecorder(files[i], `w${i}`);
        while (!stop) {
          await app.locks
            .withLock(
              'shared',
              async (lock: Lock) => {
                rec.acq('shared', lock.token, lock.fence);
                let releasing = false;
                lock.signal.addEventListener(
                  'abort',
                  () => !releasing && rec.lost('shared', lock.token, String(lock.signal.reason)),
                );
                await sleep(20 + Math.random() * 30);
                sections++;
                releasing = true;
                rec.rel('shared', lock.token);
              },
              { waitTimeout: 20_000 },
            )
            .catch(() => sleep(100)); // an acquire that failed during the election: try again
        }
        rec.close();
      });
      await sleep(1_500);
      const before = sections;
      const leader = await ensemble.leader();
      await leader.stop('SIGKILL');
      const killedAt = sections;
      // The queue must move again after re-election. Sessions of clients that lost contact
      // for too long are replaced; their old nodes leave with the session (<= session timeout),
      // so allow election + session timeout + slack on a loaded machine.
      const until = now() + 30_000;
      while (sections < killedAt + 5 && now() < until) await sleep(100);
      const after = sections;
      stop = true;
      await Promise.all(workers);
      expect(before).toBeGreaterThan(0);
      expect(after).toBeGreaterThanOrEqual(killedAt + 5);
      const result = checkHistory(readHistory(files));
      expect(result.violations).toEqual([]);
    } finally {
      for (const app of apps) await app.close();
      await ensemble.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('connection cut right after a create reaches the server: no orphan node, no deadlock', async () => {
    // Nothing left behind: another client gets the key at once, and no node remains.
    await throughProxy('cut', 2_000, async (proxy, t) => {
      let cut = 0;
      proxy.onClientData((chunk) => {
        // ZooKeeper request framing: length(4) xid(4) type(4); type 1 = create.
        if (cut === 0 && chunk.length >= 12 && chunk.readInt32BE(8) === 1) {
          cut++;
          return 'forward-then-cut';
        }
        return 'forward';
      });
      const outcome = await t.locks.acquire('cut', { waitTimeout: 10_000 }).then(
        (lock) => ({ lock }),
        (error: unknown) => ({ error }),
      );
      expect(cut).toBe(1);
      if ('lock' in outcome) {
        expect(outcome.lock.isHeld()).toBe(true);
        await outcome.lock.release();
      } else {
        expect(outcome.error).toMatchObject({ code: expect.stringMatching(/^LOCK_/) });
      }
    });
  }, 60_000);

  it.each<[string, 'forward-then-cut' | 'drop-then-cut']>([
    ['reaches the server (reply lost)', 'forward-then-cut'],
    ['never reaches the server', 'drop-then-cut'],
  ])(
    'connection cut while a release %s: the node still goes, nobody stays blocked',
    async (_label, mode) => {
      await throughProxy('rel', SESSION_MS, async (proxy, t) => {
        const lock = await t.locks.acquire('rel');
        const lost: string[] = [];
        t.locks.on('lost', (e) => lost.push(e.reason ?? ''));
        let cut = 0;
        proxy.onClientData((chunk) => {
          // type 2 = delete: the release of our lock node.
          if (cut === 0 && chunk.length >= 12 && chunk.readInt32BE(8) === 2) {
            cut++;
            if (mode === 'forward-then-cut') return 'forward-then-cut';
            setImmediate(() => proxy.cutAll());
            return 'drop';
          }
          return 'forward';
        });
        await lock.release();
        expect(cut).toBe(1);
        expect(lost).toEqual([]); // a lost reply is not a lost lock
      });
    },
    60_000,
  );

  it('FIFO: waiters are granted in the order they queued', async () => {
    const zk = await startZkStandalone();
    const apps: LockTestApp[] = [];
    try {
      for (let i = 0; i < 5; i++) apps.push(await createLockApp(zkOptions(zk.connectString)));
      const holder = await apps[0].locks.acquire('fifo');
      const order: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 1; i < apps.length; i++) {
        const queued = new Promise<void>((resolve) => {
          const off = apps[i].locks.on('contended', () => {
            off();
            resolve();
          });
        });
        waiters.push(
          apps[i].locks.withLock(
            'fifo',
            async () => {
              order.push(i);
              await sleep(20);
            },
            { waitTimeout: 20_000 },
          ),
        );
        await queued;
        await sleep(150); // its queue node exists before the next one queues
      }
      await holder.release();
      await Promise.all(waiters);
      expect(order).toEqual([1, 2, 3, 4]);
    } finally {
      for (const app of apps) await app.close();
      await zk.destroy();
    }
  }, 60_000);
});
