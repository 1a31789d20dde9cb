import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { encodeKey } from '../../lib/backends/zookeeper/zk-paths';
import type { ZkClient, ZkModule, ZkStat } from '../../lib/backends/zookeeper/zk-types';
import type { LockModuleOptions } from '../../lib/index';
import { createLockApp } from '../support/lock-app';
import { startZkStandalone, stopAllZk, type ZkNode } from '../../servers/zk-servers';

// A released key's node is kept briefly for the next acquisition (saving two round trips per
// cycle), then removed, and a closing app removes the ones still pending.
const zk = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as ZkModule;
const ROOT = '/tidy-test';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('zookeeper key node tidying', () => {
  let server: ZkNode;
  let raw: ZkClient;
  let options: LockModuleOptions;

  beforeAll(async () => {
    server = await startZkStandalone();
    options = {
      backends: {
        z: { type: 'zookeeper', connectionString: server.connectString, rootPath: ROOT },
      },
    };
    raw = zk.createClient(server.connectString, { sessionTimeout: 4_000 });
    await new Promise<void>((resolve) => {
      raw.once('connected', () => resolve());
      raw.connect();
    });
  });

  afterAll(async () => {
    raw?.close();
    await stopAllZk();
  });

  const exists = (key: string) =>
    new Promise<ZkStat | null>((resolve, reject) =>
      raw.exists(`${ROOT}/${encodeKey(key)}`, undefined, (err, stat) =>
        err ? reject(err) : resolve(stat),
      ),
    );

  it('removes an emptied key node about 2 s after the release, not at once', async () => {
    const app = await createLockApp(options);
    try {
      await (await app.locks.acquire('later')).release();
      expect(await exists('later')).not.toBeNull();
      // Taken again meanwhile: the pending removal is cancelled and starts over at release.
      await sleep(1_500);
      await (await app.locks.acquire('later')).release();
      await sleep(1_000);
      expect(await exists('later')).not.toBeNull();
      await sleep(1_500);
      expect(await exists('later')).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('bounded footprint: after thousands of distinct keys are locked and released, nothing is left under the root', async () => {
    const children = () =>
      new Promise<string[]>((resolve, reject) =>
        raw.getChildren(ROOT, undefined, (err, names) => (err ? reject(err) : resolve(names))),
      );
    const app = await createLockApp(options);
    try {
      const n = 3_000;
      let fence = 0;
      for (let i = 0; i < n; i += 100) {
        const locks = await Promise.all(
          Array.from({ length: 100 }, (_, j) => app.locks.acquire(`order:${i + j}`)),
        );
        for (const lock of locks) fence = Math.max(fence, lock.fence as number);
        await Promise.all(locks.map((lock) => lock.release()));
      }
      // Every key had its node while it was used...
      expect((await children()).length).toBeGreaterThan(0);
      // ...and the tidy-up removes them about 2 s after their release: the store's footprint
      // goes back to nothing, whatever the number of keys.
      const deadline = performance.now() + 15_000;
      while ((await children()).length > 0 && performance.now() < deadline) await sleep(250);
      expect(await children()).toEqual([]);
      // Fences keep rising for a key whose node was removed (they are the node's czxid).
      const again = await app.locks.acquire('order:0');
      expect(again.fence as number).toBeGreaterThan(fence);
      await again.release();
    } finally {
      await app.close();
    }
  }, 60_000);

  it('close() removes the key nodes still waiting for removal', async () => {
    const app = await createLockApp(options);
    await (await app.locks.acquire('at-close')).release();
    expect(await exists('at-close')).not.toBeNull();
    await app.close();
    expect(await exists('at-close')).toBeNull();
  });
});
