/**
 * Many waiters on one key (issue 18): a queued waiter watches only its predecessor and reads
 * nothing until that watch fires, so n waiters cost the server O(1) requests per hand-off and
 * none while the holder holds. Counted on the server (mntr: packets received, watches), not
 * timed: a waiter that re-read the queue on a timer made n reads of n names per period, queued
 * ahead of the read that hands the lock over, and 1,000 waiters collapsed to ~1 section/s.
 * Without that timer, a watch armed under a session since replaced must be armed again (it
 * never fires): a waiter queued again behind the same holder is still woken by its release.
 * The counts are printed (`ZK-WAITERS-COUNTS`) for the report.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { encodeKey } from '../../lib/backends/zookeeper/zk-paths';
import { ZkSession } from '../../lib/backends/zookeeper/zk-session';
import type { ZkModule } from '../../lib/backends/zookeeper/zk-types';
import { ZookeeperLockBackend } from '../../lib/backends/zookeeper/zookeeper.backend';
import { Redactor } from '../../lib/core/shared/redactor';
import type { Lock, LockModuleOptions } from '../../lib/index';
import { sleep, within } from '../support/async';
import { createLockApp } from '../support/lock-app';
import { startZkStandalone, stopAllZk, zkFourLetter, type ZkNode } from '../../servers/zk-servers';

const zk = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as ZkModule;
const ROOT = '/waiters-test';
const counts: Record<string, number> = {};

/** One figure of the server's `mntr` answer. */
async function mntr(server: ZkNode, name: string): Promise<number> {
  const text = await zkFourLetter(server.clientPort, 'mntr');
  const line = text.split('\n').find((l) => l.startsWith(`${name}\t`));
  if (!line) throw new Error(`mntr has no ${name}:\n${text}`);
  return Number(line.split('\t')[1]);
}

/** Polls `read` until `done(value)`, at most `ms`; names what it waited for otherwise. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms: number, what: string) {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > deadline) throw new Error(`${what}: still ${String(value)}`);
    await sleep(50);
  }
}

describe('zookeeper: many waiters on one key', () => {
  afterAll(async () => {
    process.stdout.write(`ZK-WAITERS-COUNTS ${JSON.stringify(counts)}\n`);
    await stopAllZk();
  });

  it('200 queued waiters send nothing while the holder holds (one watch each, on its predecessor), then take the key in turn at O(1) requests per hand-off', async () => {
    const WAITERS = 200;
    // A server of its own: its counters count only this test's sessions.
    const server = await startZkStandalone();
    const options: LockModuleOptions = {
      backends: {
        z: { type: 'zookeeper', connectionString: server.connectString, rootPath: ROOT },
      },
    };
    const holderApp = await createLockApp(options);
    const waitersApp = await createLockApp(options);
    try {
      const held = await holderApp.locks.acquire('herd');
      const order: number[] = [];
      let inside = 0;
      let overlaps = 0;
      const waiters = Array.from({ length: WAITERS }, async (_, i) => {
        const lock: Lock = await waitersApp.locks.acquire('herd', { waitTimeout: 60_000 });
        if (++inside > 1) overlaps++;
        order.push(i);
        inside--;
        await lock.release();
      });
      // Every waiter queued and its watch armed: one watch per waiter, each on its own
      // predecessor (a watch on the key node would be one for the whole session).
      await until(
        async () => (await holderApp.locks.inspect('herd')).waiting ?? 0,
        (n) => n === WAITERS,
        20_000,
        'waiters queued',
      );
      const watches = await until(
        () => mntr(server, 'zk_watch_count'),
        (n) => n >= WAITERS,
        20_000,
        'watches armed',
      );
      expect(watches).toBe(WAITERS);

      // The holder keeps the key 2.5 s: the waiters must stay silent meanwhile. Only the two
      // sessions' keep-alive traffic (pings, the liveness probe) reaches the server; a waiter
      // re-reading the queue every second would send 2 x 200 reads of 200 names here.
      const before = await mntr(server, 'zk_packets_received');
      await sleep(2_500);
      const duringHold = (await mntr(server, 'zk_packets_received')) - before;
      counts['requests during a 2.5 s hold, 200 queued'] = duringHold;
      expect(duringHold).toBeLessThan(WAITERS / 4);

      // Released: each waiter in turn is woken by its watch, reads the queue once, is granted,
      // and releases (read + delete), so a few requests per hand-off, whatever the queue length.
      const releasedAt = await mntr(server, 'zk_packets_received');
      await held.release();
      await within(Promise.all(waiters), 30_000, 'every waiter granted once');
      const perHandOff = ((await mntr(server, 'zk_packets_received')) - releasedAt) / WAITERS;
      counts['requests per hand-off, 200 in turn'] = perHandOff;
      expect(order).toHaveLength(WAITERS);
      expect(overlaps).toBe(0);
      expect(perHandOff).toBeLessThan(6);
      expect(await mntr(server, 'zk_watch_count')).toBe(0);
    } finally {
      await waitersApp.close();
      await holderApp.close();
    }
  }, 90_000);

  it('a waiter whose session is replaced queues again behind the same holder and is woken by its release (its watch re-armed under the new session)', async () => {
    const server = await startZkStandalone();
    const redactor = new Redactor();
    // The backend built by hand, as the factory does, to reach its session: a replacement
    // (liveness check, expiry, an undeletable node) is otherwise only reached through faults
    // that also take the waiter's connection, and with it the waiter.
    const backendOn = async (): Promise<{ session: ZkSession; backend: ZookeeperLockBackend }> => {
      const session = new ZkSession(zk, {
        connectionString: server.connectString,
        sessionTimeout: 4_000,
        auth: [],
        probePath: '/',
        label: 'test',
        redactor,
      });
      await session.start(5_000, 'fail');
      const acls = zk.ACL.OPEN_ACL_UNSAFE;
      return { session, backend: new ZookeeperLockBackend(zk, session, ROOT, acls, 'z', redactor) };
    };
    const holder = await backendOn();
    const waiter = await backendOn();
    const abort = new AbortController();
    try {
      expect(
        await holder.backend.tryAcquire({ key: 'replaced', token: 'holder', ttlMs: 30_000 }),
      ).not.toBeNull();
      const granted = waiter.backend.acquire({
        key: 'replaced',
        token: 'waiter',
        ttlMs: 30_000,
        waitMs: 60_000,
        signal: abort.signal,
      });
      // The waiter's node (the one after the holder's), read by the holder's session.
      const waiterNodes = async () =>
        (await holder.session.getChildren(`${ROOT}/${encodeKey('replaced')}`)).filter((n) =>
          n.startsWith('_c_waiter-'),
        );
      const [first] = await until(waiterNodes, (n) => n.length === 1, 5_000, 'waiter queued');
      const watchArmed = () =>
        until(
          () => mntr(server, 'zk_watch_count'),
          (n) => n === 1,
          5_000,
          'the watch armed',
        );
      await watchArmed();
      // A new session: the waiter's node goes with the old one, and so does its watch on the
      // holder's node. It queues again, behind that same node.
      waiter.session.abandon('replaced by the test');
      await until(
        waiterNodes,
        (n) => n.length === 1 && n[0] !== first,
        5_000,
        'the waiter queued again, alone, under its new session',
      );
      // Its old node gone, so its old session closed with the watch that session had armed.
      await watchArmed();
      expect(await holder.backend.release('replaced', 'holder')).toBe(true);
      // Woken by the watch armed under the new session (the old one never fires).
      expect(await within(granted, 5_000, 'the grant after the release')).not.toBeNull();
      expect(await waiter.backend.release('replaced', 'waiter')).toBe(true);
    } finally {
      abort.abort();
      await waiter.backend.close();
      await holder.backend.close();
    }
  }, 60_000);
});
