import { randomUUID } from 'node:crypto';
import {
  killAllAppsNow,
  startApp,
  stopAllApps,
  type AppProcess,
} from '../../sample-app/demo/app-process';
import { callJson, runLoad, type LoadResult } from '../../sample-app/demo/load-client';
import type { Profile } from '../harness/profile';
import { fmt, type SuiteResult } from '../harness/result';
import { dropTable, TEST_DATABASE } from '../../servers/databases';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';

/** App processes sharing the store and the lock server, as two replicas behind a balancer. */
const PROCESSES = 2;
/**
 * Orders in flight on each process (as in the demo): 16 in all, four per segment at N = 4, so
 * every lock always has a queue and the locks, not the load client, set the pace.
 */
const IN_FLIGHT_PER_PROCESS = 8;
/**
 * N. 4 rather than 8: on an idle 2-core machine the 4-segment run uses about half the CPU
 * (load client, two Nest processes, PostgreSQL, Redis all on it) and reaches 3.8x of the ideal
 * 4x, while 8 segments took 80% of the CPU for 6.5x, so there the machine, not the lock, starts
 * to set the figure, and any other load on it would cut the speed-up. It is also the demo's N.
 */
const SEGMENTS = 4;
/**
 * DEDUCT_WORK_MS: the pricing/payment stand-in done while holding the lock. 20 ms is about four
 * times an order's SQL and Redis time, so with one segment the lock's hold time sets the pace
 * (about 1000 / 25 = 40 orders/s at 15% CPU), and the 4-segment run keeps CPU headroom. At
 * 10 ms the single lock still bound the rate, but the 4-segment run needed 75% of the CPU.
 */
const WORK_MS = 20;
/** The app's tables with LOCK_BACKEND=redis (no lock table), dropped after the run. */
const APP_TABLES = ['order_ledger', 'stock_segment', 'product'];

/** What one configuration measured. */
interface SegmentRun {
  segments: number;
  initialStock: number;
  load: LoadResult;
  finalStock: number;
  ledgerOrders: number;
  ordersPerSec: number;
  /** Mean answer time by Little's law (orders in flight ÷ throughput). */
  meanLatencyMs: number;
}

/**
 * Issue 8, sample app: orders/s of the inventory app with one stock lock per SKU vs the stock
 * split into N segments (a lock each), 2 app processes, locks in Redis, products and the order
 * ledger in PostgreSQL (the app's realistic multi-process setup). Throws if the stock and the
 * ledger do not add up afterwards (an oversold or lost order).
 */
export async function sampleAppSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const run = randomUUID().slice(0, 8);
  // Own tables per run: nothing left by an earlier run (or another bench) can skew this one.
  const tablePrefix = `bench_${run}_`;
  const env: Record<string, string> = {
    STORE: 'postgres',
    PGDATABASE: TEST_DATABASE,
    TABLE_PREFIX: tablePrefix,
    LOCK_BACKEND: 'redis',
    REDIS_URL: MACHINE_REDIS_URL,
    DEDUCT_MODE: 'lock',
    SEGMENTS: '1', // the default for a reset; each product below sets its own segment count
    DEDUCT_WORK_MS: String(WORK_MS),
    LOCK_TTL_MS: '10000',
    LOCK_WAIT_MS: '10000',
  };
  // A runner exiting mid-suite skips `finally`: the children must not outlive it anyway.
  process.once('exit', killAllAppsNow);
  try {
    const apps: AppProcess[] = await Promise.all(
      Array.from({ length: PROCESSES }, (_, i) => startApp(`bench-app#${i}`, env)),
    );
    const runs: SegmentRun[] = [];
    for (const segments of [1, SEGMENTS]) {
      runs.push(await sell(apps, `bench-${run}-s${segments}`, segments, profile.orders));
    }
    const [single, split] = runs;
    const speedUp = split.ordersPerSec / single.ordersPerSec;
    const label = (r: SegmentRun): string =>
      r.segments === 1 ? '1 segment (one lock per SKU)' : `${r.segments} segments`;
    return {
      id: 'sample-app',
      title: 'Sample app throughput: one stock lock vs stock segments, 2 app processes',
      tables: [
        {
          title: `Inventory app, ${PROCESSES} processes, one SKU, one-unit orders`,
          columns: [
            'Configuration',
            'orders',
            'accepted',
            'refused (409)',
            'orders/s',
            'mean latency ms',
            'speed-up vs 1',
          ],
          rows: runs.map((r) => [
            label(r),
            String(r.load.orders),
            String(r.load.accepted),
            String(r.load.busy + r.load.conflicts),
            fmt(r.ordersPerSec),
            fmt(r.meanLatencyMs),
            fmt(r.ordersPerSec / single.ordersPerSec),
          ]),
          note:
            `${PROCESSES} app processes (DEDUCT_MODE=lock), locks in Redis, products and ledger in ` +
            `PostgreSQL (db ${TEST_DATABASE}); ${IN_FLIGHT_PER_PROCESS} orders in flight per process, ` +
            `stock = 2 x orders so nothing sells out. Each order holds its lock over ` +
            `DEDUCT_WORK_MS=${WORK_MS} ms of simulated work plus its SQL, so one lock admits one ` +
            `order at a time and caps the rate near 1000 / (${WORK_MS} ms + SQL); ${SEGMENTS} ` +
            `segments admit ${SEGMENTS}. orders/s = accepted ÷ wall time of the load, after a ` +
            "warm-up on the same SKU; latency is the mean by Little's law (orders in flight ÷ " +
            'orders/s; the load client does not time single orders). Checked after each run: ' +
            'final stock + accepted = initial stock and one ledger row per accepted order.',
        },
      ],
      targets: [],
      charts: [
        {
          id: 'sample-app',
          title: `Inventory app orders/s, ${PROCESSES} processes (higher is better)`,
          valueTitle: 'orders/s',
          points: runs.map((r) => ({
            label: r.segments === 1 ? '1 segment' : `${r.segments} segments`,
            group: r.segments === 1 ? 'one lock' : 'segmented',
            value: Math.round(r.ordersPerSec),
          })),
        },
      ],
      data: {
        processes: PROCESSES,
        inFlightPerProcess: IN_FLIGHT_PER_PROCESS,
        workMs: WORK_MS,
        runs,
        speedUp,
      },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await stopAllApps(2_000);
    killAllAppsNow(); // stopAllApps waits for exits; this only catches a child that would not go
    process.removeListener('exit', killAllAppsNow);
    // Leftover tables are harmless (unique names): never let cleanup hide the run's own error.
    await dropTables(tablePrefix).catch((err: unknown) =>
      console.warn(`sample-app bench: could not drop ${tablePrefix}* tables: ${String(err)}`),
    );
  }
}

/** Seeds `sku`, warms the path up, reseeds, sells `orders` one-unit orders, checks the books. */
async function sell(
  apps: readonly AppProcess[],
  sku: string,
  segments: number,
  orders: number,
): Promise<SegmentRun> {
  const initialStock = orders * 2;
  const targets = apps.map((app) => app.url);
  const load = (count: number): Promise<LoadResult> =>
    runLoad({ targets, sku, orders: count, concurrencyPerTarget: IN_FLIGHT_PER_PROCESS });
  // The first orders of a fresh process pay for JIT, pool connections and Redis script loading;
  // a warm-up on this very SKU (so the segmented path is warm too) keeps that out of the rate.
  await seed(apps[0], sku, initialStock, segments);
  await load(Math.max(PROCESSES * IN_FLIGHT_PER_PROCESS, Math.round(orders / 10)));
  await seed(apps[0], sku, initialStock, segments);

  const result = await load(orders);
  if (result.failed > 0) {
    throw new Error(
      `sample-app bench: ${result.failed} orders failed (${segments} segments): ${result.failures.join('; ')}`,
    );
  }
  // Read back through the other process: the books must agree across replicas.
  const view = await callJson('GET', `${apps[apps.length - 1].url}/inventory/${sku}`);
  if (view.status !== 200)
    throw new Error(`sample-app bench: read-back ${JSON.stringify(view.body)}`);
  const finalStock = Number(view.body.stock);
  const ledgerOrders = Number(view.body.orders);
  if (finalStock + result.accepted !== initialStock || ledgerOrders !== result.accepted) {
    throw new Error(
      `sample-app bench (${segments} segments): initial ${initialStock}, accepted ` +
        `${result.accepted}, final stock ${finalStock}, ledger ${ledgerOrders}: ` +
        'stock + accepted must equal the initial stock with one ledger row per order',
    );
  }
  const ordersPerSec = result.accepted / (result.elapsedMs / 1000);
  return {
    segments,
    initialStock,
    load: result,
    finalStock,
    ledgerOrders,
    ordersPerSec,
    meanLatencyMs: ((PROCESSES * IN_FLIGHT_PER_PROCESS) / ordersPerSec) * 1000,
  };
}

/** Creates or resets the product with `stock` units over `segments` rows (PUT, the app's reset). */
async function seed(app: AppProcess, sku: string, stock: number, segments: number): Promise<void> {
  const reply = await callJson('PUT', `${app.url}/inventory/${sku}`, { stock, segments });
  if (reply.status !== 200) {
    throw new Error(`sample-app bench: seeding ${sku} failed: ${JSON.stringify(reply.body)}`);
  }
}

/** Drops this run's tables (servers/databases.ts: PGHOST, PGPORT, PGUSER... as the app reads). */
async function dropTables(prefix: string): Promise<void> {
  for (const table of APP_TABLES) await dropTable('postgres', `${prefix}${table}`);
}
