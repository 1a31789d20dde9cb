// The sample app's shared and counted locks end to end, on real app processes: price reads
// under a `shared` lock while re-prices rewrite the price in two steps under an `exclusive`
// one, and checkouts paying a provider that accepts N concurrent calls under a lock with
// `permits: N`. Overlap is measured across processes from the spans the app returns
// (CLOCK_MONOTONIC, system-wide). The unlocked read must tear under the same load, and the
// fake provider must refuse a call beyond its limit, or the checks here would prove nothing.
import { afterAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '../../sample-app/app/app-config';
import { FakePaymentProvider } from '../../sample-app/app/payment-provider';
import { stopAllApps, type AppProcess } from '../../sample-app/demo/app-process';
import { runCheckoutLoad } from '../../sample-app/demo/checkout-load';
import { callJson } from '../../sample-app/demo/load-client';
import { runPriceLoad } from '../../sample-app/demo/price-load';
import { freshSku, sqliteEnv, withApps } from '../support/sample-apps';

const LIMIT = 3;
const REPRICES = 8;
const CHECKOUTS = 30;

/** A fresh SKU with a price set on the first app. */
async function pricedSku(apps: readonly AppProcess[]): Promise<string> {
  const sku = freshSku();
  const set = await callJson('PUT', `${apps[0].url}/prices/${sku}`, { netCents: 1_000 });
  expect(set).toMatchObject({ status: 200, body: { netCents: 1_000, grossCents: 1_200 } });
  return sku;
}

afterAll(async () => {
  await stopAllApps(); // only does something if a test failed halfway
});

// The app's default configuration (its lock backend follows it), and the memory backend on one
// process: the backend choice is the app's own LOCK_BACKEND, nothing here special-cases one.
describe.each<[string, Record<string, string>, number]>([
  ['embedded default (SQLite table locks), 2 processes', {}, 2],
  ['LOCK_BACKEND=memory, 1 process', { LOCK_BACKEND: 'memory' }, 1],
])('sample app sharing, %s', (_label, backendEnv, processes) => {
  const appsWith = async <T>(
    extra: Record<string, string>,
    work: (apps: AppProcess[]) => Promise<T>,
  ): Promise<T> => {
    const db = sqliteEnv();
    const env = { ...db.env, ...backendEnv, ...extra };
    try {
      return await withApps(
        Array.from({ length: processes }, () => env),
        work,
      );
    } finally {
      db.cleanup();
    }
  };

  it('price reads under shared: never torn, overlapping each other, and every re-price got in', async () => {
    await appsWith({}, async (apps) => {
      const sku = await pricedSku(apps);
      const load = await runPriceLoad({
        targets: apps.map((app) => app.url),
        sku,
        reprices: REPRICES,
        readersPerTarget: 8 / processes,
        unlockedReadersPerTarget: 0,
      });
      expect(load.failures).toEqual([]);
      expect(load.failed).toBe(0);
      expect(load.reprices).toBe(REPRICES); // writer preference: readers did not starve it
      expect(load.maxConcurrentReprices).toBe(1);
      expect(load.locked.reads).toBeGreaterThan(REPRICES);
      expect(load.locked.torn).toBe(0);
      expect(load.locked.duringReprice).toBe(0);
      expect(load.locked.maxConcurrent).toBeGreaterThan(1);
      const final = await callJson('GET', `${apps[apps.length - 1].url}/prices/${sku}`);
      expect(final.body).toMatchObject({ revision: REPRICES, consistent: true, locked: true });
    });
  }, 60_000);

  it(`payments under permits ${LIMIT}: provider calls reach ${LIMIT} at once, never more, one per connection`, async () => {
    await appsWith({ PAYMENT_PROVIDER_LIMIT: String(LIMIT) }, async (apps) => {
      const sku = await pricedSku(apps);
      const load = await runCheckoutLoad({
        targets: apps.map((app) => app.url),
        sku,
        checkouts: CHECKOUTS,
        concurrencyPerTarget: 8 / processes,
      });
      expect(load.failures).toEqual([]);
      expect(load.failed).toBe(0);
      expect(load.overLimit).toBe(0);
      expect(load.paid).toBe(CHECKOUTS);
      expect(load.maxConcurrentCalls).toBe(LIMIT);
      expect(load.connections).toEqual([0, 1, 2]); // the permits, 0..N-1
      expect(load.maxCallsPerConnection).toBe(1);
    });
  }, 60_000);
});

describe('sample app sharing: the checks can fail', () => {
  it('the same price read without the lock sees torn prices while re-prices run', async () => {
    const db = sqliteEnv();
    try {
      await withApps([db.env, db.env], async (apps) => {
        const sku = await pricedSku(apps);
        const load = await runPriceLoad({
          targets: apps.map((app) => app.url),
          sku,
          reprices: REPRICES,
          readersPerTarget: 0,
          unlockedReadersPerTarget: 4,
        });
        expect(load.failures).toEqual([]);
        expect(load.reprices).toBe(REPRICES);
        expect(load.unlocked.duringReprice).toBeGreaterThan(0);
        expect(load.unlocked.torn).toBeGreaterThan(0);
      });
    } finally {
      db.cleanup();
    }
  }, 60_000);

  it('the fake provider refuses a call beyond its limit and a second call on a busy connection', async () => {
    const provider = new FakePaymentProvider(
      loadConfig({ PAYMENT_PROVIDER_LIMIT: '2', PAYMENT_LATENCY_MS: '30' }),
    );
    const busyConnection = await Promise.allSettled([
      provider.authorize(0, 100),
      provider.authorize(0, 100),
    ]);
    expect(busyConnection.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    const overLimit = await Promise.allSettled([
      provider.authorize(0, 100),
      provider.authorize(1, 100),
      provider.authorize(1, 100),
    ]);
    expect(overLimit.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const noSuchConnection = await Promise.allSettled([provider.authorize(2, 100)]);
    expect(noSuchConnection[0].status).toBe('rejected');
    expect(provider.stats()).toEqual({ limit: 2, calls: 6, maxConcurrent: 3, overLimit: 3 });
  });
});
