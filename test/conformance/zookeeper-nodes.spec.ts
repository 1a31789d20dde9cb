/**
 * What the zookeeper backend leaves in ZooKeeper, read with a raw client: an aborted waiter's
 * node is deleted before the abort returns (and, when the ensemble does not answer, as soon as
 * it does); `inspect` reports the store's own numbers (the holder's czxid, the key node's pzxid
 * when free, the nodes behind the holder); `forceRelease` deletes the holder's node, the next in
 * line is granted and the old holder's renewal fails; the ACL still applies to it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { encodeKey, sortLockNodes, zxidToNumber } from '../../lib/backends/zookeeper/zk-paths';
import type { ZkClient } from '../../lib/backends/zookeeper/zk-types';
import { LockAbortedError, LockBackendError, LockLostError } from '../../lib/index';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { aborted, settle, sleep, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { queuedOn } from '../support/lock-checks';
import { childrenOf, rawClient as rawZkClient, statOf } from '../support/zk-raw';
import { startTcpProxy } from '../../servers/tcp-proxy';
import { startZkEnsemble, startZkStandalone, stopAllZk } from '../../servers/zk-servers';

const ROOT = '/nodes-test';
const SESSION_MS = 4_000;
const QUICK_MS = 1_000;

afterAll(() => stopAllZk());

/** A raw client (no lock library), optionally with digest credentials. */
const rawClient = (connectString: string, credentials?: string): Promise<ZkClient> =>
  rawZkClient(connectString, SESSION_MS, credentials);

const dirOf = (key: string) => `${ROOT}/${encodeKey(key)}`;

/** The lock nodes of `key`, in queue order ([] when the key node does not exist). */
const lockNodes = async (client: ZkClient, key: string): Promise<string[]> =>
  sortLockNodes(await childrenOf(client, dirOf(key)));

const stat = statOf;

/** Polls `read` until it gives `expected` (an ensemble member may lag a little), at most 1 s. */
async function eventually<T>(read: () => Promise<T>, expected: T, what: string): Promise<void> {
  const deadline = performance.now() + QUICK_MS;
  for (;;) {
    const value = await read();
    if (JSON.stringify(value) === JSON.stringify(expected)) return;
    if (performance.now() > deadline) {
      throw new Error(`${what}: ${JSON.stringify(value)} instead of ${JSON.stringify(expected)}`);
    }
    await sleep(20);
  }
}

const options = (connectionString: string, extra: object = {}): LockModuleOptions => ({
  backends: {
    zk: {
      type: 'zookeeper',
      connectionString,
      rootPath: ROOT,
      sessionTimeout: SESSION_MS,
      ...extra,
    },
  },
});

/** Waits until `t` sees `n` callers queued on `key`. */
const queued = (t: LockTestApp, key: string, n: number): Promise<void> =>
  queuedOn(t.locks, key, n, QUICK_MS);

describe.each([
  ['standalone', async () => startZkStandalone().then((s) => [s.connectString, s] as const)],
  ['3-node ensemble', async () => startZkEnsemble(3).then((e) => [e.connectString, e] as const)],
])('zookeeper nodes (%s)', (_name, start) => {
  let connectString: string;
  let raw: ZkClient;
  let holderApp: LockTestApp;
  let waiterApp: LockTestApp;

  beforeAll(async () => {
    [connectString] = await start();
    raw = await rawClient(connectString);
    holderApp = await createLockApp(options(connectString));
    waiterApp = await createLockApp(options(connectString));
  }, 60_000);

  afterAll(async () => {
    raw?.close();
    await holderApp?.close();
    await waiterApp?.close();
  });

  it('an aborted waiter’s node is deleted before the abort returns', async () => {
    const holder = await holderApp.locks.acquire('abort');
    const controller = new AbortController();
    const waiter = settle(
      waiterApp.locks.acquire('abort', { waitTimeout: 60_000, signal: controller.signal }),
    );
    await queued(holderApp, 'abort', 1);
    await eventually(() => lockNodes(raw, 'abort').then((n) => n.length), 2, 'nodes queued');
    const started = performance.now();
    controller.abort();
    const outcome = await within(waiter, QUICK_MS, 'the aborted wait');
    expect(performance.now() - started).toBeLessThan(QUICK_MS);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(LockAbortedError);
    // Gone already for the waiter's own session; for every reader within a moment.
    expect(await waiterApp.locks.inspect('abort')).toMatchObject({ held: true, waiting: 0 });
    const holderNode = async () => {
      const nodes = await lockNodes(raw, 'abort');
      const stats = await Promise.all(nodes.map((n) => stat(raw, `${dirOf('abort')}/${n}`)));
      return stats.map((s) => s && zxidToNumber(s.czxid));
    };
    await eventually(holderNode, [holder.fence], 'nodes left after the abort');
    await holder.release();
  });

  it('inspect reports the store: the holder’s czxid, the nodes behind it, the key node’s pzxid when free', async () => {
    expect(await holderApp.locks.inspect('never-used')).toEqual({
      held: false,
      fence: null,
      waiting: 0,
      holders: 0,
      mine: false,
    });
    const holder = await holderApp.locks.acquire('inspect');
    const controllers = [new AbortController(), new AbortController()];
    const waiters = controllers.map((c) =>
      settle(waiterApp.locks.acquire('inspect', { waitTimeout: 60_000, signal: c.signal })),
    );
    await queued(holderApp, 'inspect', 2);
    const info = await holderApp.locks.inspect('inspect');
    await eventually(() => lockNodes(raw, 'inspect').then((n) => n.length), 3, 'nodes queued');
    const nodes = await lockNodes(raw, 'inspect');
    const first = await stat(raw, `${dirOf('inspect')}/${nodes[0]}`);
    expect(info).toEqual({
      held: true,
      fence: zxidToNumber(first!.czxid),
      waiting: 2,
      holders: 1,
      mode: 'exclusive',
      permits: 1,
      slots: [0],
      mine: true,
    });
    expect(info.fence).toBe(holder.fence);
    expect(await waiterApp.locks.inspect('inspect')).toMatchObject({ held: true, mine: false });
    for (const c of controllers) c.abort();
    await Promise.all(waiters);
    await holder.release();
    const free = await holderApp.locks.inspect('inspect');
    expect(free).toMatchObject({ held: false, waiting: 0, holders: 0 });
    // Every fence handed out so far is at most this, and the next one is above it.
    await eventually(
      () => stat(raw, dirOf('inspect')).then((dir) => zxidToNumber(dir!.pzxid)),
      free.fence,
      'the key node’s pzxid',
    );
    expect(free.fence).toBeGreaterThanOrEqual(holder.fence!);
    const next = await waiterApp.locks.acquire('inspect');
    expect(next.fence).toBeGreaterThan(free.fence!);
    await next.release();
  });

  it('forceRelease deletes the holder’s node: the next in line is granted, the old holder’s renewal fails', async () => {
    const admin = await createLockApp(options(connectString));
    try {
      const holder = await holderApp.locks.acquire('force', { ttl: 1_200 });
      let grantedAt = Infinity;
      const waiter = waiterApp.locks.acquire('force', { waitTimeout: 10_000 }).then((lock) => {
        grantedAt = performance.now();
        return lock;
      });
      await queued(admin, 'force', 1);
      await eventually(() => lockNodes(raw, 'force').then((n) => n.length), 2, 'nodes queued');
      const before = await lockNodes(raw, 'force');
      const forcedAt = performance.now();
      expect(await admin.locks.forceRelease('force')).toBe(true);
      const next = await within(waiter, QUICK_MS, 'the next in line');
      expect(grantedAt - forcedAt).toBeLessThan(QUICK_MS);
      expect(next.fence).toBeGreaterThan(holder.fence!);
      await eventually(() => lockNodes(raw, 'force'), before.slice(1), 'nodes after the force');
      // Another process's holder learns it at its next renewal (a third of its 1.2 s lease).
      await within(aborted(holder.signal), 1_200, 'the old holder’s signal');
      expect(holder.signal.reason).toBeInstanceOf(LockLostError);
      expect(holder.isHeld()).toBe(false);
      await holder.release(); // frees nothing of the new holder's
      expect(next.isHeld()).toBe(true);
      await eventually(() => lockNodes(raw, 'force'), before.slice(1), 'nodes after the release');
      await next.release();
      expect(await admin.locks.forceRelease('force')).toBe(false);
    } finally {
      await admin.close();
    }
  });
});

describe('zookeeper nodes: batched renewal', () => {
  it('checks every held node in one multi; a node deleted in the middle fails only its own lock', async () => {
    const server = await startZkStandalone();
    const raw = await rawClient(server.connectString);
    const app = await createLockApp(options(server.connectString));
    try {
      const keys = Array.from({ length: 30 }, (_, i) => `batch-${i}`);
      const locks = await Promise.all(keys.map((key) => app.locks.acquire(key, { ttl: 30_000 })));
      const backend = app.manager.getBackend('zk');
      const requests = locks.map((lock, i) => ({
        key: keys[i],
        token: lock.token,
        ttlMs: 30_000,
      }));
      expect(await backend.extendMany!(requests)).toEqual(keys.map(() => true));
      // Two nodes deleted behind the holder's back (an operator, a lost session): the server
      // stops at the first missing one; the checks after it are asked again.
      for (const i of [7, 19]) {
        const [node] = await lockNodes(raw, keys[i]);
        await new Promise<void>((resolve, reject) =>
          raw.remove(`${dirOf(keys[i])}/${node}`, -1, (err) => (err ? reject(err) : resolve())),
        );
      }
      expect(await backend.extendMany!(requests)).toEqual(keys.map((_, i) => i !== 7 && i !== 19));
      // A token that never held the key is not renewed either.
      expect(await backend.extendMany!([{ ...requests[3], token: 'someone-else' }])).toEqual([
        false,
      ]);
      for (const lock of locks) await lock.release();
    } finally {
      await app.close();
      raw.close();
    }
  });
});

describe('zookeeper nodes: an outage around an abort', () => {
  it('an abort returns at once while the ensemble does not answer; its nodes go once it does', async () => {
    const server = await startZkStandalone();
    const proxy = await startTcpProxy(server.clientPort);
    const raw = await rawClient(server.connectString);
    const direct = await createLockApp(options(server.connectString));
    const proxied = await createLockApp(options(proxy.address, { sessionTimeout: 10_000 }));
    try {
      const holder = await direct.locks.acquire('cut');
      // Queued, then the ensemble goes silent: the abort cannot wait for the deletion.
      const queuedAbort = new AbortController();
      const first = settle(
        proxied.locks.acquire('cut', { waitTimeout: 60_000, signal: queuedAbort.signal }),
      );
      await queued(direct, 'cut', 1);
      proxy.blackhole(true);
      // A second waiter whose create is held in flight: aborted before any reply.
      const inFlightAbort = new AbortController();
      const second = settle(
        proxied.locks.acquire('cut', { waitTimeout: 60_000, signal: inFlightAbort.signal }),
      );
      await sleep(100);
      for (const [controller, outcome] of [
        [queuedAbort, first],
        [inFlightAbort, second],
      ] as const) {
        const started = performance.now();
        controller.abort();
        const result = await within(outcome, QUICK_MS, 'an aborted wait');
        expect(performance.now() - started).toBeLessThan(QUICK_MS);
        expect((result as { error: unknown }).error).toBeInstanceOf(LockAbortedError);
      }
      expect(await lockNodes(raw, 'cut')).toHaveLength(2); // the queued one is still there
      proxy.blackhole(false); // what was held arrives: the create, then the deletions
      await within(
        (async () => {
          while ((await lockNodes(raw, 'cut')).length !== 1) await sleep(20);
        })(),
        SESSION_MS,
        'only the holder’s node left',
      );
      await sleep(500); // a late create would show up here
      expect(await lockNodes(raw, 'cut')).toHaveLength(1);
      await holder.release();
      const next = await proxied.locks.tryAcquire('cut');
      expect(next).not.toBeNull();
      await next!.release();
    } finally {
      proxy.blackhole(false);
      raw.close();
      await direct.close();
      await proxied.close();
      await proxy.close();
      await server.destroy();
    }
  }, 60_000);
});

describe('zookeeper nodes: ACLs apply to the admin calls', () => {
  it('with acl creator, another identity can neither inspect nor force-release (NO_AUTH); the lock stays', async () => {
    const server = await startZkStandalone();
    const owner = await createLockApp(
      options(server.connectString, { auth: [{ scheme: 'digest', credentials: 'locker:pw1' }] }),
    );
    const other = await createLockApp(
      options(server.connectString, { auth: [{ scheme: 'digest', credentials: 'other:pw2' }] }),
    );
    try {
      const lock = await owner.locks.acquire('acl');
      for (const call of [
        () => other.locks.forceRelease('acl'),
        () => other.locks.inspect('acl'),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockBackendError);
        expect((error as Error).message).toContain('NO_AUTH');
      }
      expect(lock.isHeld()).toBe(true);
      expect(await owner.locks.inspect('acl')).toMatchObject({ held: true, mine: true });
      expect(await owner.locks.forceRelease('acl')).toBe(true);
      await within(aborted(lock.signal), QUICK_MS, 'the holder told');
    } finally {
      await owner.close();
      await other.close();
      await server.destroy();
    }
  }, 60_000);
});
