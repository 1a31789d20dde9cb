// The inventory sample app end to end: real app processes (sample-app/app/main.ts in child
// processes) on each lock backend, a concurrent load spread across them, and the verdict read
// back from the store. The unlocked mode must oversell under the same kind of load, or the
// exactness checks would prove nothing.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CLEAN_APP_ENV,
  startApp,
  stopAllApps,
  type AppProcess,
} from '../../sample-app/demo/app-process';
import {
  callJson,
  runLoad,
  type JsonReply,
  type LoadResult,
} from '../../sample-app/demo/load-client';
import { dropTable, TEST_DATABASE, uniqueTableName } from '../../servers/databases';
import { startZkStandalone, type ZkNode } from '../../servers/zk-servers';
import { freshSku, sqliteEnv, withApps } from '../support/sample-apps';

const STOCK = 15;
const ORDERS = 40;
const IN_FLIGHT_PER_APP = 5;
const APP_TABLES = ['product', 'stock_segment', 'order_ledger', 'price', 'distributed_lock'];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Seeds a SKU with `stock` on the first app, fires `orders` orders across all apps. */
async function sell(
  apps: readonly AppProcess[],
  opts: { stock?: number; orders?: number; inFlight?: number } = {},
): Promise<{ sku: string; load: LoadResult; view: Record<string, unknown> }> {
  const sku = freshSku();
  const seeded = await callJson('PUT', `${apps[0].url}/inventory/${sku}`, {
    stock: opts.stock ?? STOCK,
  });
  expect(seeded.status).toBe(200);
  const load = await runLoad({
    targets: apps.map((app) => app.url),
    sku,
    orders: opts.orders ?? ORDERS,
    concurrencyPerTarget: opts.inFlight ?? IN_FLIGHT_PER_APP,
  });
  const view = await callJson('GET', `${apps[apps.length - 1].url}/inventory/${sku}`);
  expect(view.status).toBe(200);
  return { sku, load, view: view.body };
}

/** Every unit sold exactly once: no oversell, ledger and stock agree with the answers. */
function expectExact(load: LoadResult, view: Record<string, unknown>): void {
  expect(load.failures).toEqual([]);
  expect(load.failed).toBe(0);
  expect(load.busy + load.conflicts).toBe(0);
  expect(load.accepted).toBe(STOCK);
  expect(load.soldOut).toBe(ORDERS - STOCK);
  expect(view).toMatchObject({
    stock: 0,
    orders: STOCK,
    sold: STOCK,
    oversold: 0,
    consistent: true,
  });
}

async function dropAppTables(kind: 'postgres' | 'mariadb', prefix: string): Promise<void> {
  for (const table of APP_TABLES) await dropTable(kind, `${prefix}${table}`);
}

afterAll(async () => {
  await stopAllApps(); // only does something if a test failed halfway
});

describe('sample app: 2 processes, every lock backend, oversold = 0', () => {
  it('embedded default (no configuration: one SQLite file, table locks)', async () => {
    const db = sqliteEnv();
    try {
      await withApps([db.env, db.env], async (apps) => {
        const { load, view } = await sell(apps);
        expectExact(load, view);
      });
    } finally {
      db.cleanup();
    }
  }, 40_000);

  describe.each<['postgres' | 'mariadb', 'table' | 'for-update' | 'advisory']>([
    ['postgres', 'table'],
    ['postgres', 'for-update'],
    ['mariadb', 'advisory'],
  ])('%s store and %s locks', (kind, strategy) => {
    it('sells exactly the stock', async () => {
      const prefix = `${uniqueTableName('inv')}_`;
      const env = {
        STORE: kind,
        LOCK_BACKEND: kind,
        LOCK_STRATEGY: strategy,
        TABLE_PREFIX: prefix,
        PGDATABASE: TEST_DATABASE,
        MYSQL_DATABASE: TEST_DATABASE,
      };
      try {
        await withApps([env, env], async (apps) => {
          const { load, view } = await sell(apps);
          expectExact(load, view);
        });
      } finally {
        await dropAppTables(kind, prefix);
      }
    }, 40_000);
  });

  it('redis locks (127.0.0.1:6379), SQLite store', async () => {
    const db = sqliteEnv();
    const env = { ...db.env, LOCK_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:6379' };
    try {
      await withApps([env, env], async (apps) => {
        const { load, view } = await sell(apps);
        expectExact(load, view);
      });
    } finally {
      db.cleanup();
    }
  }, 40_000);

  describe('zookeeper locks, SQLite store', () => {
    let zk: ZkNode | undefined;
    beforeAll(async () => {
      zk = await startZkStandalone();
    }, 40_000);
    afterAll(async () => {
      await zk?.destroy();
    }, 20_000);

    it('sells exactly the stock', async () => {
      const db = sqliteEnv();
      const env = { ...db.env, LOCK_BACKEND: 'zookeeper', ZK_CONNECT: zk!.connectString };
      try {
        await withApps([env, env], async (apps) => {
          const { load, view } = await sell(apps);
          expectExact(load, view);
        });
      } finally {
        db.cleanup();
      }
    }, 40_000);
  });
});

describe('sample app: deduction modes', () => {
  it('without the lock the same kind of load oversells (so the checks above can fail)', async () => {
    const db = sqliteEnv();
    // Long work between read and write, many orders in flight: the whole first wave reads the
    // initial stock before anyone writes, so more orders are accepted than there are units.
    const env = { ...db.env, DEDUCT_MODE: 'none', DEDUCT_WORK_MS: '50' };
    try {
      await withApps([env, env], async (apps) => {
        const { load, view } = await sell(apps, { inFlight: 10 });
        expect(load.failed).toBe(0);
        expect(load.accepted).toBeGreaterThan(STOCK);
        expect(view.oversold).toBe(load.accepted - STOCK);
        expect(view.consistent).toBe(false); // lost updates: the stock did not go down per order
        expect(view.orders).toBe(load.accepted);
      });
    } finally {
      db.cleanup();
    }
  }, 40_000);

  it('optimistic (version compare-and-set, no lock) sells exactly the stock', async () => {
    const db = sqliteEnv();
    const env = { ...db.env, DEDUCT_MODE: 'optimistic' };
    try {
      await withApps([env, env], async (apps) => {
        const { load, view } = await sell(apps);
        expectExact(load, view);
      });
    } finally {
      db.cleanup();
    }
  }, 40_000);

  it('segmented stock (3 segments, a lock each) sells exactly the stock', async () => {
    const db = sqliteEnv();
    const env = { ...db.env, SEGMENTS: '3' };
    try {
      await withApps([env, env], async (apps) => {
        const { load, view } = await sell(apps);
        expectExact(load, view);
        expect(view.segments).toBe(3);
        expect(view.segmentStock).toEqual([
          expect.objectContaining({ segment: 0, stock: 0 }),
          expect.objectContaining({ segment: 1, stock: 0 }),
          expect.objectContaining({ segment: 2, stock: 0 }),
        ]);
      });
    } finally {
      db.cleanup();
    }
  }, 40_000);
});

describe('sample app: HTTP contract and fencing', () => {
  const db = sqliteEnv();
  let apps: AppProcess[] = [];
  let sku = '';
  const post = (app: AppProcess, path: string, body?: unknown): Promise<JsonReply> =>
    callJson('POST', `${app.url}/inventory/${path}`, body);

  beforeAll(async () => {
    apps = await Promise.all([
      startApp('a', { ...CLEAN_APP_ENV, ...db.env }),
      startApp('b', { ...CLEAN_APP_ENV, ...db.env }),
    ]);
    sku = freshSku();
    expect((await callJson('PUT', `${apps[0].url}/inventory/${sku}`, { stock: 2 })).status).toBe(
      200,
    );
  }, 40_000);
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    db.cleanup();
  }, 20_000);

  it('unknown SKU: 404 on every route', async () => {
    const unknown = freshSku();
    for (const reply of [
      await callJson('GET', `${apps[0].url}/inventory/${unknown}`),
      await post(apps[0], `${unknown}/deduct`, { qty: 1 }),
      await post(apps[1], `${unknown}/restock`, { qty: 1 }),
      await post(apps[1], `${unknown}/stocktake`, { ms: 10 }),
    ]) {
      expect(reply).toEqual({
        status: 404,
        body: expect.objectContaining({ statusCode: 404, code: 'UNKNOWN_SKU' }),
      });
    }
  });

  it('a quantity that is not a positive integer: 400, nothing deducted', async () => {
    const bad: Array<{ label: string; body?: unknown }> = [
      { label: '0', body: { qty: 0 } },
      { label: '-1', body: { qty: -1 } },
      { label: '1.5', body: { qty: 1.5 } },
      { label: '"x"', body: { qty: 'x' } },
      { label: '"1" (a string)', body: { qty: '1' } },
      { label: 'null', body: { qty: null } },
      { label: 'missing', body: {} },
      { label: 'no body' },
    ];
    for (const { label, body } of bad) {
      const reply = await post(apps[0], `${sku}/deduct`, body);
      expect({ label, status: reply.status, code: reply.body.code }).toEqual({
        label,
        status: 400,
        code: 'BAD_INPUT',
      });
      expect(String(reply.body.message)).toMatch(/^qty must be an integer from 1/);
    }
    const restock = await post(apps[1], `${sku}/restock`, { qty: 0 });
    expect(restock.status).toBe(400);
    const badSku = await callJson(
      'GET',
      `${apps[0].url}/inventory/${encodeURIComponent('no such!')}`,
    );
    expect(badSku).toMatchObject({ status: 400, body: { code: 'BAD_INPUT' } });
    const view = await callJson('GET', `${apps[1].url}/inventory/${sku}`);
    expect(view.body).toMatchObject({ stock: 2, orders: 0 });
  });

  it('sold out: 422 SOLD_OUT, also for more than what is left', async () => {
    const first = await post(apps[0], `${sku}/deduct`, { qty: 3 });
    expect(first).toMatchObject({ status: 422, body: { code: 'SOLD_OUT', available: 2 } });
    expect((await post(apps[0], `${sku}/deduct`, { qty: 2 })).status).toBe(201);
    const after = await post(apps[1], `${sku}/deduct`, { qty: 1 });
    expect(after).toMatchObject({ status: 422, body: { statusCode: 422, code: 'SOLD_OUT' } });
    const restocked = await post(apps[1], `${sku}/restock`, { qty: 5 });
    expect(restocked).toMatchObject({
      status: 200,
      body: { stock: 5, restocked: 5, sold: 2, consistent: true },
    });
  });

  it('busy lock: 409 LOCK_NOT_ACQUIRED at once on the no-wait route; a deduction waits its turn', async () => {
    const holding = post(apps[0], `${sku}/stocktake`, { ms: 1_500 });
    await waitUntilLocked(apps[1], sku);
    const started = performance.now();
    const busy = await post(apps[1], `${sku}/stocktake`, { ms: 10 });
    expect(busy).toEqual({
      status: 409,
      body: expect.objectContaining({ statusCode: 409, code: 'LOCK_NOT_ACQUIRED' }),
    });
    expect(performance.now() - started).toBeLessThan(1_000);
    const waited = await post(apps[1], `${sku}/deduct`, { qty: 1 });
    expect(waited.status).toBe(201);
    expect((await holding).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThan(500); // it queued behind the stocktake
  });

  it('a holder that lost its lock (frozen past its ttl) has its write refused by the fence', async () => {
    const fenceDb = sqliteEnv();
    try {
      await withApps(
        [
          // a: slow orders and a short lease, so freezing it loses the lock mid-order.
          { ...fenceDb.env, DEDUCT_WORK_MS: '2500', LOCK_TTL_MS: '600' },
          // b: fast orders, and a short wait so that the busy case answers quickly.
          { ...fenceDb.env, DEDUCT_WORK_MS: '0', LOCK_WAIT_MS: '300' },
        ],
        async ([a, b]) => {
          const fenced = freshSku();
          await callJson('PUT', `${a.url}/inventory/${fenced}`, { stock: 5 });
          const slow = post(a, `${fenced}/deduct`, { qty: 1 });
          await waitUntilLocked(b, fenced);
          const busy = await post(b, `${fenced}/deduct`, { qty: 1 });
          expect(busy).toMatchObject({ status: 409, body: { code: 'LOCK_NOT_ACQUIRED' } });
          a.freeze();
          try {
            await sleep(1_000); // a's lease (600 ms, no renewal while frozen) runs out
            const overtaking = await post(b, `${fenced}/deduct`, { qty: 1 });
            expect(overtaking.status).toBe(201);
          } finally {
            a.thaw();
          }
          const refused = await slow;
          expect(refused).toMatchObject({ status: 409, body: { code: 'STALE_FENCE' } });
          const view = await callJson('GET', `${b.url}/inventory/${fenced}`);
          expect(view.body).toMatchObject({ stock: 4, orders: 1, sold: 1, consistent: true });
        },
      );
    } finally {
      fenceDb.cleanup();
    }
  }, 40_000);
});

/** Polls GET until the SKU's lock is held (the request holding it has got it). */
async function waitUntilLocked(app: AppProcess, sku: string): Promise<void> {
  const deadline = performance.now() + 5_000;
  while (performance.now() < deadline) {
    const view = await callJson('GET', `${app.url}/inventory/${sku}`);
    if (view.body.locked === true) return;
    await sleep(20);
  }
  throw new Error(`the lock of ${sku} was never taken`);
}
