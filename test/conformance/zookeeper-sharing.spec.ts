/**
 * Shared and counted locks on ZooKeeper, beyond the battery: the nodes they leave (read with a
 * raw client) and that none is left once the last holder goes; writer preference between two
 * apps (two sessions); a holder whose session expires gives up its read hold and its slot to
 * the waiters of another app, after its own signal aborted.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { encodeKey } from '../../lib/backends/zookeeper/zk-paths';
import type { ZkClient } from '../../lib/backends/zookeeper/zk-types';
import { LockLostError } from '../../lib/index';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { aborted, settle, sleep, stillPendingAfter, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { queuedOn } from '../support/lock-checks';
import { childrenOf, rawClient, textOf } from '../support/zk-raw';
import { startTcpProxy } from '../../servers/tcp-proxy';
import { startZkStandalone, stopAllZk, type ZkNode } from '../../servers/zk-servers';

const ROOT = '/sharing-test';
const SESSION_MS = 3_000;
const QUICK_MS = 1_000;

const dirOf = (key: string) => `${ROOT}/${encodeKey(key)}`;
const options = (connectionString: string): LockModuleOptions => ({
  backends: {
    zk: { type: 'zookeeper', connectionString, rootPath: ROOT, sessionTimeout: SESSION_MS },
  },
});

/** The children of `key`'s node, each named by its kind (`read`, `lock`, `sem2`) or as is (slots), in queue order. */
async function layout(raw: ZkClient, key: string): Promise<string[]> {
  const names = await childrenOf(raw, dirOf(key));
  const seq = (name: string) => (/\d{10}$/.test(name) ? Number(name.slice(-10)) : -1);
  return names
    .sort((a, b) => seq(a) - seq(b) || (a < b ? -1 : 1))
    .map((name) => /-([a-z0-9]+)-\d{10}$/.exec(name)?.[1] ?? name);
}

/** Waits until `t` sees `n` callers queued on `key`. */
const queued = (t: LockTestApp, key: string, n: number): Promise<void> =>
  queuedOn(t.locks, key, n, QUICK_MS);

afterAll(() => stopAllZk());

describe('zookeeper shared and counted locks', () => {
  let server: ZkNode;
  let raw: ZkClient;
  let a: LockTestApp;
  let b: LockTestApp;

  beforeAll(async () => {
    server = await startZkStandalone();
    raw = await rawClient(server.connectString, SESSION_MS);
    a = await createLockApp(options(server.connectString));
    b = await createLockApp(options(server.connectString));
  }, 60_000);

  afterAll(async () => {
    raw?.close();
    await a?.close();
    await b?.close();
    await server?.destroy();
  });

  it('node layout: readers and a writer in one queue; a counted lock’s nodes and slots; nothing left after the last holder', async () => {
    // Readers of two apps, and a writer of one of them queued behind them.
    const r1 = await a.locks.acquire('layout-rw', { mode: 'shared' });
    const r2 = await b.locks.acquire('layout-rw', { mode: 'shared' });
    const writer = b.locks.acquire('layout-rw', { waitTimeout: 10_000 });
    await queued(a, 'layout-rw', 1);
    expect(await layout(raw, 'layout-rw')).toEqual(['read', 'read', 'lock']);
    expect(await a.locks.inspect('layout-rw')).toMatchObject({
      held: true,
      holders: 2,
      waiting: 1,
      mode: 'shared',
      permits: 1,
      slots: [0, 0],
      fence: r2.fence,
    });
    await r1.release();
    await r2.release();
    const w = await within(writer, QUICK_MS, 'the writer');
    expect(await layout(raw, 'layout-rw')).toEqual(['lock']);
    await w.release();
    expect(await layout(raw, 'layout-rw')).toEqual([]);

    // A counted lock: one queue node per request, one slot node per holder (its data: the
    // holder's token); a third request waits.
    const s0 = await a.locks.acquire('layout-sem', { permits: 2 });
    const s1 = await b.locks.acquire('layout-sem', { permits: 2 });
    const third = b.locks.acquire('layout-sem', { permits: 2, waitTimeout: 10_000 });
    await queued(a, 'layout-sem', 1);
    expect(await layout(raw, 'layout-sem')).toEqual(['slot-0', 'slot-1', 'sem2', 'sem2', 'sem2']);
    expect(await textOf(raw, `${dirOf('layout-sem')}/slot-${s0.permit}`)).toBe(s0.token);
    expect(await textOf(raw, `${dirOf('layout-sem')}/slot-${s1.permit}`)).toBe(s1.token);
    expect(await a.locks.inspect('layout-sem')).toMatchObject({
      held: true,
      holders: 2,
      waiting: 1,
      mode: 'exclusive',
      permits: 2,
      slots: [0, 1],
      fence: s1.fence,
    });
    await s0.release();
    // The waiter takes the freed slot, the lowest.
    const s2 = await within(third, QUICK_MS, 'the third request');
    expect(s2.permit).toBe(s0.permit);
    expect(s2.fence!).toBeGreaterThan(s1.fence!);
    expect(await textOf(raw, `${dirOf('layout-sem')}/slot-${s2.permit}`)).toBe(s2.token);
    expect(await layout(raw, 'layout-sem')).toEqual(['slot-0', 'slot-1', 'sem2', 'sem2']);
    await s1.release();
    await s2.release();
    expect(await layout(raw, 'layout-sem')).toEqual([]);

    // The emptied key nodes go too, about 2 s later: nothing is left under the root.
    await within(
      (async () => {
        while ((await childrenOf(raw, ROOT)).length > 0) await sleep(100);
      })(),
      5_000,
      'the key nodes tidied away',
    );
  }, 30_000);

  it('writer preference between two apps: a queued writer holds back later readers, then they enter together', async () => {
    const key = 'preference';
    const r1 = await a.locks.acquire(key, { mode: 'shared' });
    let writerAt = Infinity;
    const writer = b.locks.acquire(key, { waitTimeout: 10_000 }).then((lock) => {
      writerAt = performance.now();
      return lock;
    });
    await queued(a, key, 1);
    // A new reader (of the reader's own app) neither barges in nor gets through a try.
    expect(await a.locks.tryAcquire(key, { mode: 'shared' })).toBeNull();
    const readers = [a, b].map((app) =>
      settle(app.locks.acquire(key, { mode: 'shared', waitTimeout: 10_000 })),
    );
    expect(await stillPendingAfter(Promise.race(readers), 200)).toBe(true);
    expect(await a.locks.inspect(key)).toMatchObject({ holders: 1, waiting: 3, mode: 'shared' });
    await r1.release();
    const w = await within(writer, QUICK_MS, 'the writer');
    expect(w.fence!).toBeGreaterThan(r1.fence!);
    expect(await stillPendingAfter(Promise.race(readers), 200)).toBe(true);
    const releasedAt = performance.now();
    await w.release();
    const later = await within(Promise.all(readers), QUICK_MS, 'the readers behind the writer');
    for (const outcome of later) {
      expect(outcome.ok).toBe(true);
      const lock = (outcome as { value: Awaited<typeof w> }).value;
      expect(lock.mode).toBe('shared');
      expect(lock.fence!).toBeGreaterThan(w.fence!);
    }
    expect(writerAt).toBeLessThan(releasedAt);
    expect(await a.locks.inspect(key)).toMatchObject({ holders: 2, waiting: 0, mode: 'shared' });
    for (const outcome of later) await (outcome as { value: Awaited<typeof w> }).value.release();
    expect(await a.locks.isLocked(key)).toBe(false);
  });

  it('readers let in together by a writer’s release: fences in queue order, all above the writer’s; a later reader’s above theirs', async () => {
    // The grant is the server's state change (the writer's node deleted): the readers behind it
    // are granted at that one instant, whichever process hears first, and their fences (their
    // nodes' czxids) follow the queue, as a Redis release admits them in one script.
    const key = 'together';
    const w = await a.locks.acquire(key);
    const readers: Array<Promise<Awaited<typeof w>>> = [];
    for (const [i, app] of [a, b, a].entries()) {
      readers.push(app.locks.acquire(key, { mode: 'shared', waitTimeout: 10_000 }));
      await queued(a, key, i + 1);
    }
    await w.release();
    const granted = await within(Promise.all(readers), QUICK_MS, 'the readers behind the writer');
    const fences = granted.map((lock) => lock.fence!);
    expect(fences[0]).toBeGreaterThan(w.fence!);
    expect([...fences].sort((x, y) => x - y)).toEqual(fences);
    const late = await b.locks.acquire(key, { mode: 'shared' });
    expect(late.fence!).toBeGreaterThan(Math.max(...fences));
    for (const lock of [...granted, late]) await lock.release();
    expect(await a.locks.isLocked(key)).toBe(false);
  });

  it('across two apps (two sessions): writers alone, readers together, never more than permits on their slots', async () => {
    const apps = [a, b];
    let readers = 0;
    let writers = 0;
    let maxReaders = 0;
    const slotHolders = new Map<number, string>();
    let maxSlots = 0;
    const problems: string[] = [];
    const work = async (worker: number): Promise<void> => {
      const app = apps[worker % 2];
      for (let round = 0; round < 6; round++) {
        const writer = worker < 2 && round % 2 === 0;
        await app.locks.withLock(
          'cross-rw',
          async () => {
            if (writer ? readers + writers > 0 : writers > 0) problems.push('rw overlap');
            if (writer) writers++;
            else readers++;
            maxReaders = Math.max(maxReaders, readers);
            await sleep(writer ? 5 : 15);
            if (writer) writers--;
            else readers--;
          },
          { mode: writer ? 'exclusive' : 'shared', waitTimeout: 20_000 },
        );
        await app.locks.withLock(
          'cross-sem',
          async (lock) => {
            if (slotHolders.has(lock.permit)) problems.push(`slot ${lock.permit} twice`);
            slotHolders.set(lock.permit, lock.token);
            maxSlots = Math.max(maxSlots, slotHolders.size);
            await sleep(10);
            slotHolders.delete(lock.permit);
          },
          { permits: 3, waitTimeout: 20_000 },
        );
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, worker) => work(worker)));
    expect(problems).toEqual([]);
    expect(maxReaders).toBeGreaterThanOrEqual(2);
    expect(maxSlots).toBeLessThanOrEqual(3);
    expect(maxSlots).toBeGreaterThanOrEqual(2);
    expect(await layout(raw, 'cross-rw')).toEqual([]);
    expect(await layout(raw, 'cross-sem')).toEqual([]);
  }, 60_000);

  it('forceRelease frees every holder: all readers, or every slot; the waiters go on, the old holders are told', async () => {
    const admin = await createLockApp(options(server.connectString));
    try {
      // Readers of two apps; a writer waits behind them.
      const readers = [
        await a.locks.acquire('force-rw', { mode: 'shared', ttl: 1_200 }),
        await b.locks.acquire('force-rw', { mode: 'shared', ttl: 1_200 }),
      ];
      const writer = b.locks.acquire('force-rw', { waitTimeout: 10_000 });
      await queued(admin, 'force-rw', 1);
      expect(await admin.locks.forceRelease('force-rw')).toBe(true);
      const w = await within(writer, QUICK_MS, 'the writer after the force');
      expect(w.fence!).toBeGreaterThan(Math.max(...readers.map((r) => r.fence!)));
      expect(await layout(raw, 'force-rw')).toEqual(['lock']);
      // Each old reader learns it at its next renewal (a third of its 1.2 s lease).
      for (const r of readers) {
        await within(aborted(r.signal), 1_200, 'an old reader told');
        expect(r.signal.reason).toBeInstanceOf(LockLostError);
      }
      await w.release();

      // Both slots of a counted lock; a third request waits and gets the lowest slot.
      const slots = [
        await a.locks.acquire('force-sem', { permits: 2, ttl: 1_200 }),
        await b.locks.acquire('force-sem', { permits: 2, ttl: 1_200 }),
      ];
      const third = b.locks.acquire('force-sem', { permits: 2, waitTimeout: 10_000 });
      await queued(admin, 'force-sem', 1);
      expect(await admin.locks.forceRelease('force-sem')).toBe(true);
      const next = await within(third, QUICK_MS, 'the waiter after the force');
      expect(next.permit).toBe(0);
      expect(next.fence!).toBeGreaterThan(Math.max(...slots.map((l) => l.fence!)));
      expect(await layout(raw, 'force-sem')).toEqual(['slot-0', 'sem2']);
      for (const l of slots) {
        await within(aborted(l.signal), 1_200, 'an old slot holder told');
        await l.release(); // frees nothing of the new holder's
      }
      expect(await admin.locks.inspect('force-sem')).toMatchObject({ holders: 1, slots: [0] });
      await next.release();
      expect(await admin.locks.forceRelease('force-sem')).toBe(false);
    } finally {
      await admin.close();
    }
  }, 30_000);

  it.each(['acquire', 'tryAcquire'] as const)(
    'a slot claim whose reply is lost (%s): one slot or none is left, never two',
    async (call) => {
      const key = `claim-cut-${call}`;
      const proxy = await startTcpProxy(server.clientPort);
      const cut = await createLockApp(options(proxy.address));
      try {
        let cuts = 0;
        proxy.onClientData((chunk) => {
          // ZooKeeper request framing: length(4) xid(4) type(4). Type 14 = multi: the claim;
          // then type 4 = getData: its look for the slot it may have taken, lost as well, so
          // the claim fails without knowing.
          const type = chunk.length >= 12 ? chunk.readInt32BE(8) : 0;
          if ((cuts === 0 && type === 14) || (cuts === 1 && type === 4)) {
            cuts++;
            return 'forward-then-cut';
          }
          return 'forward';
        });
        const outcome = await settle(
          call === 'acquire'
            ? cut.locks.acquire(key, { permits: 3, waitTimeout: 10_000 })
            : cut.locks.tryAcquire(key, { permits: 3 }),
        );
        expect(cuts).toBe(2);
        const slots = async () => (await layout(raw, key)).filter((n) => n.startsWith('slot-'));
        // A wait goes on after the reconnection, with the slot it claimed before (found by its
        // token), alone; a try fails, and the engine's cleanup finds the slot by its token.
        expect(outcome.ok).toBe(call === 'acquire');
        if (outcome.ok && outcome.value) {
          const lock = outcome.value;
          expect(await slots()).toEqual([`slot-${lock.permit}`]);
          expect(await textOf(raw, `${dirOf(key)}/slot-${lock.permit}`)).toBe(lock.token);
          await lock.release();
        }
        // Whatever the outcome, nothing of it stays (a failed call's slot is cleaned up too).
        await within(
          (async () => {
            while ((await layout(raw, key)).length > 0) await sleep(20);
          })(),
          QUICK_MS * 3,
          'the nodes of the cut claim gone',
        );
        const next = await a.locks.tryAcquire(key, { permits: 3 });
        expect(next?.permit).toBe(0);
        await next!.release();
      } finally {
        proxy.onClientData(null);
        await cut.close();
        await proxy.close();
      }
    },
    30_000,
  );

  it('a holder whose session expires: its signal aborts, then its read hold and its slot go to the waiters', async () => {
    const proxy = await startTcpProxy(server.clientPort);
    const cut = await createLockApp(options(proxy.address));
    try {
      const reader = await cut.locks.acquire('expire-rw', { mode: 'shared' });
      const slotHolder = await cut.locks.acquire('expire-sem', { permits: 2 });
      const other = await a.locks.acquire('expire-sem', { permits: 2 });
      let abortedAt = Infinity;
      reader.signal.addEventListener('abort', () => (abortedAt = performance.now()));
      const grantedAt: number[] = [];
      const stamp = <T>(lock: T): T => {
        grantedAt.push(performance.now());
        return lock;
      };
      const writer = b.locks.acquire('expire-rw', { waitTimeout: 20_000 }).then(stamp);
      const slot = b.locks.acquire('expire-sem', { permits: 2, waitTimeout: 20_000 }).then(stamp);
      await queued(a, 'expire-rw', 1);
      await queued(a, 'expire-sem', 1);
      // The holder's app goes silent: the server expires its session (and its nodes).
      const cutAt = performance.now();
      proxy.blackhole(true);
      const [w, s] = await within(
        Promise.all([writer, slot]),
        SESSION_MS + 3_000,
        'the waiters granted after the expiry',
      );
      await within(aborted(reader.signal), QUICK_MS, 'the expired reader told');
      await within(aborted(slotHolder.signal), QUICK_MS, 'the expired slot holder told');
      expect(reader.signal.reason).toBeInstanceOf(LockLostError);
      expect(slotHolder.signal.reason).toBeInstanceOf(LockLostError);
      // Never two holders: the expired one gave up before anyone else was granted.
      expect(abortedAt - cutAt).toBeLessThanOrEqual(SESSION_MS + 1_000);
      for (const t of grantedAt) expect(t).toBeGreaterThan(abortedAt);
      expect(w.fence!).toBeGreaterThan(reader.fence!);
      expect(s.permit).toBe(slotHolder.permit);
      expect(s.fence!).toBeGreaterThan(slotHolder.fence!);
      expect(await textOf(raw, `${dirOf('expire-sem')}/slot-${s.permit}`)).toBe(s.token);
      expect(await layout(raw, 'expire-sem')).toEqual(['slot-0', 'slot-1', 'sem2', 'sem2']);
      await w.release();
      await s.release();
      await other.release();
      expect(await layout(raw, 'expire-rw')).toEqual([]);
      expect(await layout(raw, 'expire-sem')).toEqual([]);
    } finally {
      proxy.blackhole(false);
      await cut.close();
      await proxy.close();
    }
  }, 30_000);
});
