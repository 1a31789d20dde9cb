/**
 * The demo's shared and counted locks step, on fresh app processes: price reads under a
 * `shared` lock while a re-pricer rewrites the price in two steps under an `exclusive` one
 * (with the same read done without the lock alongside, as the contrast), then checkouts paying
 * a provider that accepts PAYMENT_LIMIT concurrent calls, under a lock with `permits`.
 */
import { startApp, type AppProcess } from './app-process';
import { runCheckoutLoad, type CheckoutLoadResult } from './checkout-load';
import { callJson } from './load-client';
import { runPriceLoad, type PriceLoadResult } from './price-load';
import { ProgressBar } from './progress-bar';
import { renderTable } from './verdict-table';

const SKU = 'demo-price';
const REPRICES = 10;
const READERS_PER_PROCESS = 4;
const UNLOCKED_READERS_PER_PROCESS = 2;
const CHECKOUTS = 60;
const CHECKOUTS_IN_FLIGHT_PER_PROCESS = 8;
/** The fake provider's concurrency limit, and the permits of the lock in front of it. */
const PAYMENT_LIMIT = 3;

/** What the step measured. */
export interface SharingOutcome {
  prices: PriceLoadResult;
  payments: CheckoutLoadResult;
}

/** One sentence on what the step does, for the demo's introduction. */
export const SHARING_INTRO =
  `Then price reads (${READERS_PER_PROCESS} in flight per process under a shared lock, ` +
  `${UNLOCKED_READERS_PER_PROCESS} without it) while ${REPRICES} re-prices rewrite the price in two ` +
  `steps under an exclusive lock, and ${CHECKOUTS} checkouts paying a provider that takes ` +
  `${PAYMENT_LIMIT} concurrent calls, under a lock with permits: ${PAYMENT_LIMIT}.`;

/** Starts `processes` apps with `env`, runs both loads across them, stops them. */
export async function runSharingStep(
  processes: number,
  env: Record<string, string>,
): Promise<SharingOutcome> {
  const apps: AppProcess[] = await Promise.all(
    Array.from({ length: processes }, (_, i) =>
      startApp(`${SKU}#${i}`, { ...env, PAYMENT_PROVIDER_LIMIT: String(PAYMENT_LIMIT) }),
    ),
  );
  try {
    const targets = apps.map((app) => app.url);
    const set = await callJson('PUT', `${targets[0]}/prices/${SKU}`, { netCents: 1_000 });
    if (set.status !== 200)
      throw new Error(`setting the price failed: ${JSON.stringify(set.body)}`);
    const priceBar = new ProgressBar('prices: shared / exclusive'.padEnd(30), REPRICES);
    const prices = await runPriceLoad({
      targets,
      sku: SKU,
      reprices: REPRICES,
      readersPerTarget: READERS_PER_PROCESS,
      unlockedReadersPerTarget: UNLOCKED_READERS_PER_PROCESS,
      onProgress: (done) => priceBar.update(done, 're-prices'),
    });
    priceBar.finish(prices.reprices, `re-prices · ${prices.locked.reads} locked reads`);
    const payBar = new ProgressBar(`payments: permits ${PAYMENT_LIMIT}`.padEnd(30), CHECKOUTS);
    const payments = await runCheckoutLoad({
      targets,
      sku: SKU,
      checkouts: CHECKOUTS,
      concurrencyPerTarget: CHECKOUTS_IN_FLIGHT_PER_PROCESS,
      onProgress: (done) => payBar.update(done, 'checkouts'),
    });
    payBar.finish(CHECKOUTS, `checkouts · paid ${payments.paid}`);
    for (const failure of [...prices.failures, ...payments.failures]) {
      console.log(`    unexpected answer: ${failure}`);
    }
    return { prices, payments };
  } finally {
    await Promise.all(apps.map((app) => app.stop()));
  }
}

/** The step's table: one row per measurement. */
export function sharingTable({ prices, payments }: SharingOutcome): string {
  const { locked, unlocked } = prices;
  return renderTable(
    ['run', 'requests', 'failed', 'measured'],
    [
      [
        'price reads shared, re-price exclusive',
        `${locked.reads} reads, ${prices.reprices} re-prices`,
        prices.failed - unlocked.failed,
        `torn reads ${locked.torn} · max concurrent readers ${locked.maxConcurrent} · ` +
          `reads during a re-price ${locked.duringReprice} · re-prices done ${prices.reprices}/${REPRICES}`,
      ],
      [
        'price reads without the lock (contrast)',
        `${unlocked.reads} reads`,
        unlocked.failed,
        `torn reads ${unlocked.torn} · reads during a re-price ${unlocked.duringReprice}`,
      ],
      [
        `payments under permits ${PAYMENT_LIMIT}`,
        `${payments.checkouts} checkouts`,
        payments.failed,
        `max concurrent provider calls ${payments.maxConcurrentCalls} (limit ${PAYMENT_LIMIT}) · ` +
          `over-limit ${payments.overLimit} · connections (permits) used ${payments.connections.join(',')}`,
      ],
    ],
  );
}

/** What the step's table means, and whether it passed. */
export function explainSharing({ prices, payments }: SharingOutcome): {
  lines: string[];
  pass: boolean;
} {
  const { locked, unlocked } = prices;
  const readsOk =
    prices.failed === 0 &&
    locked.torn === 0 &&
    locked.duringReprice === 0 &&
    locked.maxConcurrent > 1 &&
    prices.reprices === REPRICES;
  const contrastTore = unlocked.torn > 0;
  const paymentsOk =
    payments.failed === 0 &&
    payments.overLimit === 0 &&
    payments.paid === CHECKOUTS &&
    payments.maxConcurrentCalls === PAYMENT_LIMIT &&
    payments.maxCallsPerConnection === 1;
  const lines = [
    `Shared price reads: torn ${locked.torn}, up to ${locked.maxConcurrent} at once across processes, ` +
      `${locked.duringReprice} during a re-price, ${prices.reprices}/${REPRICES} re-prices got in ` +
      '(a waiting re-price holds new readers back, so readers cannot starve it).',
    `Without the lock: ${unlocked.torn} of ${unlocked.reads} reads saw a half-written price (net and gross disagreeing).`,
    `Payments: at most ${payments.maxConcurrentCalls} provider calls at once for a limit of ${PAYMENT_LIMIT}, ` +
      `over-limit ${payments.overLimit}; each call went through the connection its permit named ` +
      `(${payments.connections.join(',')}), at most ${payments.maxCallsPerConnection} at once on one.`,
  ];
  if (!readsOk) {
    lines.push(
      'SHARING FAIL: a shared read was torn or ran during a re-price, or a re-price did not get in.',
    );
  }
  if (!contrastTore) {
    lines.push('SHARING FAIL: the unlocked reads saw no tear, so this run proved nothing.');
  }
  if (!paymentsOk) {
    lines.push(
      `SHARING FAIL: provider calls did not reach exactly ${PAYMENT_LIMIT} at once, or a checkout failed.`,
    );
  }
  return { lines, pass: readsOk && contrastTore && paymentsOk };
}
