import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import Redis, { Cluster } from 'ioredis';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import type { LockModuleOptions } from '../../lib';
import { OVERTAKE_PER_PERMIT } from '../../lib/backends/redis/scripts/lua-holders';
import { redisLockNames } from '../support/redis-names';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { settle, sleep, stillPendingAfter, within } from '../support/async';
import { evalshaCalls, footprint, ownerToken as token } from '../support/fence-footprint';
import {
  startRedisCluster,
  startRedisNode,
  type RedisClusterHandle,
  type RedisNode,
} from '../../servers/redis-servers';

// Shared and counted locks on Redis, what the conformance battery cannot see: the store's layout
// (one hash per shared or counted key, a mutex a plain string), nothing left once the last holder
// is gone, holders whose lease ran out dropped lazily with their slot reused, writer preference
// between two separate clients, a released slot kept in its process within the overtaking bound,
// and a mutex cycle of two script calls (its speed is measured). On a node and on a Cluster of
// their own, so the footprint counts only this spec's keys.

/** Where a target's servers are: raw clients to read keys, and one per master for footprints. */
interface Store {
  raw: Redis | Cluster;
  masters: Redis[];
  options: LockModuleOptions;
  stop(): Promise<void>;
}

async function singleNode(): Promise<Store> {
  const node: RedisNode = await startRedisNode();
  const raw = new Redis(node.url);
  return {
    raw,
    masters: [raw],
    options: { backends: { r: { type: 'redis', url: node.url, restartGuard: false } } },
    stop: async () => {
      raw.disconnect();
      await node.stop();
    },
  };
}

async function cluster(): Promise<Store> {
  const handle: RedisClusterHandle = await startRedisCluster(3);
  const masters = handle.nodes.map((n) => new Redis(n.url));
  const raw = new Cluster(handle.seeds.map((url) => ({ port: Number(new URL(url).port) })));
  return {
    raw,
    masters,
    options: { backends: { r: { type: 'redis', clusterNodes: handle.seeds } } },
    stop: async () => {
      raw.disconnect();
      for (const m of masters) m.disconnect();
      await handle.stop();
    },
  };
}

describe.each([
  ['redis (single node)', singleNode],
  ['redis cluster (3 masters)', cluster],
])('%s: shared and counted locks in the store', (_name, makeStore) => {
  let store: Store;
  const apps: LockTestApp[] = [];

  async function start(): Promise<{ app: LockTestApp; backend: LockBackend }> {
    const app = await createLockApp(store.options);
    apps.push(app);
    return { app, backend: app.manager.getBackend('r') };
  }

  /** The lock name's fields and values (a hash), or its type when it is not one. */
  async function holders(key: string): Promise<Record<string, string> | string> {
    const lock = redisLockNames('', key).lock;
    const type = await store.raw.type(lock);
    return type === 'hash' ? store.raw.hgetall(lock) : type;
  }

  /**
   * Waits until `n` callers queue for `key` (a waiter subscribes before it queues, which takes
   * a while on a loaded machine, longer on a Cluster).
   */
  async function queued(app: LockTestApp, key: string, n: number): Promise<void> {
    const deadline = performance.now() + 5_000;
    while ((await app.locks.inspect(key)).waiting !== n) {
      if (performance.now() > deadline) throw new Error(`${n} waiter(s) of "${key}" never queued`);
      await sleep(10);
    }
  }

  beforeAll(async () => {
    store = await makeStore();
  }, 60_000);
  beforeEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await store?.stop();
  });

  it('a mutex keeps its string: two EVALSHA a cycle (and a shared or counted cycle two as well)', async () => {
    const { app } = await start();
    await app.locks.withLock('mx:warm', () => undefined); // scripts loaded, bucket count read
    const calls = async (): Promise<number> =>
      (await Promise.all(store.masters.map((m) => evalshaCalls(m)))).reduce((a, b) => a + b, 0);
    const before = await calls();
    const lock = await app.locks.acquire('mx:k');
    expect(await store.raw.type(redisLockNames('', 'mx:k').lock)).toBe('string');
    expect(await store.raw.get(redisLockNames('', 'mx:k').lock)).toBe(
      `${lock.token} ${lock.fence}`,
    );
    await lock.release();
    expect((await calls()) - before).toBe(2);
    // A shared or counted cycle costs two as well: its release goes straight to its script.
    const between = await calls();
    const reader = await app.locks.acquire('mx:r', { mode: 'shared' });
    await reader.release();
    const slot = await app.locks.acquire('mx:s', { permits: 2 });
    await slot.release();
    expect((await calls()) - between).toBe(4);
    expect(await app.locks.isLocked('mx:r')).toBe(false);
    expect(await app.locks.isLocked('mx:s')).toBe(false);
  });

  it('readers and slots live in one hash at the lock name (mode, permits, slot, expiry, fence); nothing is left after the last release', async () => {
    const { app } = await start();
    const r1 = await app.locks.acquire('rw:k', { mode: 'shared', ttl: 10_000 });
    const r2 = await app.locks.acquire('rw:k', { mode: 'shared', ttl: 10_000 });
    const readers = await holders('rw:k');
    expect(Object.keys(readers).sort()).toEqual([r1.token, r2.token].sort());
    expect((readers as Record<string, string>)[r1.token]).toMatch(
      new RegExp(`^s 1 0 \\d+ ${r1.fence}$`),
    );
    expect(await store.raw.pttl(redisLockNames('', 'rw:k').lock)).toBeGreaterThan(9_000);
    const s0 = await app.locks.acquire('sem:k', { permits: 3 });
    const s1 = await app.locks.acquire('sem:k', { permits: 3 });
    expect((await holders('sem:k')) as Record<string, string>).toEqual({
      [s0.token]: expect.stringMatching(new RegExp(`^x 3 0 \\d+ ${s0.fence}$`)),
      [s1.token]: expect.stringMatching(new RegExp(`^x 3 1 \\d+ ${s1.fence}$`)),
    });
    // A writer queued behind the readers, and a slot waiter: their places must go too.
    const writer = app.locks.acquire('rw:k', { waitTimeout: 10_000 });
    const s2 = await app.locks.acquire('sem:k', { permits: 3 });
    const slotWaiter = app.locks.acquire('sem:k', { permits: 3, waitTimeout: 10_000 });
    await queued(app, 'rw:k', 1);
    await queued(app, 'sem:k', 1);
    expect(await app.locks.inspect('rw:k')).toMatchObject({
      held: true,
      holders: 2,
      mode: 'shared',
      waiting: 1,
    });
    expect(await app.locks.inspect('sem:k')).toMatchObject({
      holders: 3,
      mode: 'exclusive',
      permits: 3,
      slots: [0, 1, 2],
      waiting: 1,
    });
    await r1.release();
    await r2.release();
    const w = await writer;
    // The writer is a mutex: the plain string, as ever.
    expect(await holders('rw:k')).toBe('string');
    await w.release();
    await s1.release();
    const s3 = await slotWaiter;
    expect(s3.permit).toBe(1);
    for (const lock of [s0, s2, s3]) await lock.release();
    const left = (await Promise.all(store.masters.map((m) => footprint(m)))).flatMap(
      (f) => f.others,
    );
    // Only the arrival counters of the queues, which expire (2 x the 3 s waiter ttl).
    for (const { key, pttl } of left) {
      expect(key).toMatch(/:arrivals$/);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(6_000);
    }
  });

  it('a holder whose lease ran out is dropped by the next call on the key, its slot reused; the hash expires with its latest holder', async () => {
    const { app, backend } = await start();
    const dead = token();
    const grant = await backend.tryAcquire({
      key: 'exp:k',
      token: dead,
      ttlMs: 200,
      permits: 2,
    });
    expect(grant?.permit).toBe(0);
    const alive = await app.locks.acquire('exp:k', { permits: 2, ttl: 10_000 });
    expect(alive.permit).toBe(1);
    await sleep(300);
    // Lazily: the dead holder's field stays until a script touches the key ...
    expect(Object.keys(await holders('exp:k'))).toContain(dead);
    expect(await app.locks.inspect('exp:k')).toMatchObject({ holders: 1, slots: [1] });
    // ... and the next grant drops it and takes its slot, with a higher fence.
    const next = await app.locks.tryAcquire('exp:k', { permits: 2 });
    expect(next?.permit).toBe(0);
    expect(next!.fence!).toBeGreaterThan(grant!.fence!);
    expect(Object.keys(await holders('exp:k')).sort()).toEqual([alive.token, next!.token].sort());
    // A dead holder's release is refused (its lease ran out), and never frees another.
    expect(await backend.release('exp:k', dead)).toBe(false);
    await alive.release();
    await next!.release();
    // Readers that die: the key's own expiry (their latest lease) removes it, nobody calling.
    for (const ttlMs of [150, 250]) {
      await backend.tryAcquire({ key: 'exp:r', token: token(), ttlMs, mode: 'shared' });
    }
    const pttl = await store.raw.pttl(redisLockNames('', 'exp:r').lock);
    expect(pttl).toBeGreaterThan(150);
    expect(pttl).toBeLessThanOrEqual(250);
    await sleep(300);
    expect(await store.raw.exists(redisLockNames('', 'exp:r').lock)).toBe(0);
    expect(await app.locks.isLocked('exp:r')).toBe(false);
  });

  it('writer preference between two clients: once a writer of one waits, new readers of the other queue behind it', async () => {
    const a = (await start()).app;
    const b = (await start()).app;
    const reader = await a.locks.acquire('pref:k', { mode: 'shared' });
    const writer = settle(b.locks.acquire('pref:k', { waitTimeout: 10_000 }));
    await queued(a, 'pref:k', 1); // B's writer is in the key's queue
    expect(await a.locks.tryAcquire('pref:k', { mode: 'shared' })).toBeNull();
    const lateReader = settle(a.locks.acquire('pref:k', { mode: 'shared', waitTimeout: 10_000 }));
    expect(await stillPendingAfter(writer, 100)).toBe(true);
    await reader.release();
    const w = await within(writer, 1_000, 'the writer after the last reader');
    expect(w.ok).toBe(true);
    expect(await stillPendingAfter(lateReader, 150)).toBe(true);
    const writerLock = (w as { value: Awaited<ReturnType<typeof b.locks.acquire>> }).value;
    await writerLock.release();
    const r = await within(lateReader, 1_000, 'the reader behind the writer');
    expect(r.ok).toBe(true);
    const lateLock = (r as { value: typeof reader }).value;
    expect(lateLock.fence!).toBeGreaterThan(writerLock.fence!);
    await lateLock.release();
  });

  it('a released slot goes to a waiter of the releasing process before another process’s earlier one, at most OVERTAKE_PER_PERMIT × permits times', async () => {
    const a = (await start()).app;
    const b = (await start()).app;
    const permits = 2;
    const bound = OVERTAKE_PER_PERMIT * permits;
    expect(bound).toBeGreaterThan(0); // else this would only check plain queue order
    const opts = { permits, waitTimeout: 20_000 };
    const held = [await a.locks.acquire('cohort:k', opts), await a.locks.acquire('cohort:k', opts)];
    const fences = held.map((l) => l.fence!);
    // B's waiter is first in line; each of A's waiters arrives after it.
    const head = settle(b.locks.acquire('cohort:k', opts));
    await queued(a, 'cohort:k', 1);
    const grantee = async (local: Promise<unknown>): Promise<'a' | 'b'> =>
      within(
        Promise.race([local.then(() => 'a' as const), head.then(() => 'b' as const)]),
        2_000,
        'the freed slot to be granted',
      );
    for (let i = 0; i < bound; i++) {
      const local = settle(a.locks.acquire('cohort:k', opts));
      await queued(a, 'cohort:k', 2);
      await held.shift()!.release();
      // The releasing process's own waiter took the slot: B's head is overtaken, and waits on.
      expect(await grantee(local)).toBe('a');
      expect(await stillPendingAfter(head, 100)).toBe(true);
      const lock = await local;
      expect(lock.ok).toBe(true);
      held.push((lock as { value: (typeof held)[number] }).value);
      fences.push(held[held.length - 1].fence!);
    }
    // Every waiter of A arriving now is beyond the bound: B's head gets the next slot.
    const late = settle(a.locks.acquire('cohort:k', opts));
    await queued(a, 'cohort:k', 2);
    await held.shift()!.release();
    expect(await grantee(late)).toBe('b');
    expect(await stillPendingAfter(late, 100)).toBe(true);
    const granted = await head;
    expect(granted.ok).toBe(true);
    const bLock = (granted as { value: (typeof held)[number] }).value;
    fences.push(bLock.fence!);
    // B's release has no waiter of its own: A's late waiter, now first in line, is next.
    await bLock.release();
    const lateGranted = await within(late, 2_000, 'the late waiter');
    expect(lateGranted.ok).toBe(true);
    const lateLock = (lateGranted as { value: (typeof held)[number] }).value;
    fences.push(lateLock.fence!);
    expect(new Set([lateLock.permit, held[0].permit]).size).toBe(2);
    // Fences rise across every grant, whoever got it.
    expect(fences).toEqual([...fences].sort((x, y) => x - y));
    expect(new Set(fences).size).toBe(fences.length);
    for (const lock of [...held, lateLock]) await lock.release();
    expect(await holders('cohort:k')).toBe('none');
  });

  it('4 separate clients: writers alone and readers together on one key, at most 2 slot holders with distinct slots on another', async () => {
    const clients = await Promise.all(Array.from({ length: 4 }, () => start()));
    let readers = 0;
    let writers = 0;
    let maxReaders = 0;
    const slots = new Set<number>();
    const problems: string[] = [];
    const fences: number[] = [];
    const rw = async (app: LockTestApp, writer: boolean): Promise<void> =>
      app.locks.withLock(
        'mix:rw',
        async (lock) => {
          if (writer ? readers + writers > 0 : writers > 0)
            problems.push(`overlap at ${lock.fence}`);
          if (writer) writers++;
          else readers++;
          maxReaders = Math.max(maxReaders, readers);
          fences.push(lock.fence!);
          await sleep(writer ? 3 : 10 + Math.random() * 10);
          if (writer) writers--;
          else readers--;
        },
        { mode: writer ? 'exclusive' : 'shared', waitTimeout: 30_000 },
      );
    const slot = async (app: LockTestApp): Promise<void> =>
      app.locks.withLock(
        'mix:sem',
        async (lock) => {
          if (slots.has(lock.permit) || slots.size >= 2) problems.push(`slot ${lock.permit} twice`);
          slots.add(lock.permit);
          await sleep(5 + Math.random() * 10);
          slots.delete(lock.permit);
        },
        { permits: 2, waitTimeout: 30_000 },
      );
    await Promise.all(
      clients.flatMap(({ app }, c) =>
        Array.from({ length: 3 }, async (_, loop) => {
          for (let round = 0; round < 8; round++) {
            await rw(app, c === 0 && loop === 0 && round % 2 === 0);
            await slot(app);
          }
        }),
      ),
    );
    expect(problems).toEqual([]);
    expect(maxReaders).toBeGreaterThanOrEqual(2);
    expect(new Set(fences).size).toBe(fences.length);
    expect(await clients[0].app.locks.isLocked('mix:rw')).toBe(false);
    expect(await clients[0].app.locks.isLocked('mix:sem')).toBe(false);
  }, 60_000);

  it('waiters a mutex script hands the key to enter together: readers behind a released writer, slot waiters after a forceRelease', async () => {
    const { app, backend } = await start();
    const writer = await app.locks.acquire('hand:k');
    const readers = Array.from({ length: 3 }, () =>
      app.locks.acquire('hand:k', { mode: 'shared', waitTimeout: 10_000 }),
    );
    // Both slots held by a process that hangs: an operator frees the key (the mutex script).
    for (let i = 0; i < 2; i++) {
      await backend.tryAcquire({ key: 'hand:s', token: token(), ttlMs: 30_000, permits: 2 });
    }
    const slots = Array.from({ length: 2 }, () =>
      app.locks.acquire('hand:s', { permits: 2, waitTimeout: 10_000 }),
    );
    await queued(app, 'hand:k', 3);
    await queued(app, 'hand:s', 2);
    const t0 = performance.now();
    await writer.release();
    expect(await app.locks.forceRelease('hand:s')).toBe(true);
    const held = await within(Promise.all(readers), 1_000, 'the readers');
    const counted = await within(Promise.all(slots), 1_000, 'the slots');
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(held.every((r) => r.isHeld() && r.mode === 'shared')).toBe(true);
    expect(counted.map((s) => s.permit).sort()).toEqual([0, 1]);
    expect(Object.keys(await holders('hand:k')).sort()).toEqual(held.map((r) => r.token).sort());
    expect(await app.locks.inspect('hand:k')).toMatchObject({
      held: true,
      holders: 3,
      mode: 'shared',
      waiting: 0,
    });
    for (const lock of [...held, ...counted]) await lock.release();
    expect(await store.raw.exists(redisLockNames('', 'hand:k').lock)).toBe(0);
    expect(await store.raw.exists(redisLockNames('', 'hand:s').lock)).toBe(0);
  });
});
