/**
 * `npm run demo`: why the lock exists, in about 40 s and with no servers.
 *
 * For each deduction mode it starts 3 app processes sharing one SQLite file (products and
 * locks), seeds a SKU with 50 units, fires 200 concurrent one-unit orders spread across the
 * processes, and reads the result back. Then it prints the verdict: under the lock nothing is
 * oversold; without it, read-modify-write races across processes oversell; optimistic
 * compare-and-set is safe too; segmented stock sells faster than one lock.
 * Then, on fresh processes, shared and counted locks (sharing-phase.ts): price reads under a
 * shared lock never see a half-done re-price yet overlap each other, and a payment provider
 * with a limit of N concurrent calls gets exactly N at once under a lock with `permits: N`.
 * Last, leadership (leader-phase.ts): a report scheduled every second on 2 processes runs on the
 * leader only; the leader is killed and the other process takes over under a higher term.
 * Exits 0 only if the locked runs oversold nothing, the unlocked run did oversell, and the
 * sharing step measured what it should.
 * Other lock stores: the app's environment variables pass through (e.g. LOCK_BACKEND=redis).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killAllAppsNow, startApp, stopAllApps, type AppProcess } from './app-process';
import { callJson, runLoad, type LoadResult } from './load-client';
import { ProgressBar } from './progress-bar';
import {
  explainSharing,
  runSharingStep,
  SHARING_INTRO,
  sharingTable,
  type SharingOutcome,
} from './sharing-phase';
import { renderTable } from './verdict-table';
import {
  explainLeader,
  LEADER_INTRO,
  leaderTable,
  runLeaderStep,
  type LeaderOutcome,
} from './leader-phase';

const PROCESSES = 3;
const INITIAL_STOCK = 50;
const ORDERS = 200;
const IN_FLIGHT_PER_PROCESS = 8;
const SEGMENTS = 4;
/**
 * Work between reading and writing the stock (DEDUCT_WORK_MS): long enough to dominate the
 * few milliseconds of SQL per order, as a payment call would, which is when splitting the
 * lock pays off, and the window in which the unlocked mode's reads go stale.
 */
const WORK_MS = 20;

/** One run of the demo. */
interface Scenario {
  label: string;
  sku: string;
  env: Record<string, string>;
  /** The mode is expected to keep stock exact (false: the unlocked mode, expected to oversell). */
  safe: boolean;
}

/** What one run measured. */
interface Outcome {
  scenario: Scenario;
  load: LoadResult;
  finalStock: number;
  ledgerOrders: number;
}

const SCENARIOS: Scenario[] = [
  {
    label: '@Locked, one lock per SKU',
    sku: 'demo-lock',
    env: { DEDUCT_MODE: 'lock', SEGMENTS: '1' },
    safe: true,
  },
  {
    label: 'no lock (read-modify-write)',
    sku: 'demo-none',
    env: { DEDUCT_MODE: 'none', SEGMENTS: '1' },
    safe: false,
  },
  {
    label: 'optimistic (version CAS)',
    sku: 'demo-optimistic',
    env: { DEDUCT_MODE: 'optimistic', SEGMENTS: '1' },
    safe: true,
  },
  {
    label: `@Locked, ${SEGMENTS} stock segments`,
    sku: 'demo-segmented',
    env: { DEDUCT_MODE: 'lock', SEGMENTS: String(SEGMENTS) },
    safe: true,
  },
];

const dir = mkdtempSync(join(tmpdir(), 'inventory-demo-'));
const removeTempFiles = (): void => rmSync(dir, { recursive: true, force: true });

async function main(): Promise<number> {
  const store = process.env.STORE || 'sqlite';
  const locks = process.env.LOCK_BACKEND || 'sqlite';
  const where =
    store === 'sqlite' && locks === 'sqlite'
      ? 'one shared SQLite file for products and locks'
      : `products in ${store}, locks in ${locks}`;
  console.log(
    `${ORDERS} concurrent orders of 1 unit for a SKU with ${INITIAL_STOCK} in stock, spread over ` +
      `${PROCESSES} app processes (${IN_FLIGHT_PER_PROCESS} in flight each), ${where}; ` +
      `each order works ${WORK_MS} ms between reading and writing the stock.\n${SHARING_INTRO}\n` +
      `${LEADER_INTRO}\n`,
  );
  const outcomes: Outcome[] = [];
  for (const scenario of SCENARIOS) outcomes.push(await run(scenario));
  const sharing = await runSharingStep(PROCESSES, appEnv({}));
  const leadership = await runLeaderStep(dir, appEnv({}));
  console.log(
    `\n${verdictTable(outcomes)}\n\n${sharingTable(sharing)}\n\n${leaderTable(leadership)}\n`,
  );
  return explain(outcomes, sharing, leadership);
}

/** Every app's environment: the demo's store file and work time, then the scenario's own. */
function appEnv(scenarioEnv: Record<string, string>): Record<string, string> {
  return {
    ...scenarioEnv,
    DEDUCT_WORK_MS: String(WORK_MS),
    SQLITE_FILE: join(dir, 'inventory.sqlite'),
  };
}

async function run(scenario: Scenario): Promise<Outcome> {
  const env = appEnv(scenario.env);
  const apps: AppProcess[] = await Promise.all(
    Array.from({ length: PROCESSES }, (_, i) => startApp(`${scenario.sku}#${i}`, env)),
  );
  try {
    const seeded = await callJson('PUT', `${apps[0].url}/inventory/${scenario.sku}`, {
      stock: INITIAL_STOCK,
    });
    if (seeded.status !== 200) throw new Error(`seeding failed: ${JSON.stringify(seeded.body)}`);
    const bar = new ProgressBar(scenario.label.padEnd(30), ORDERS);
    const status = (r: LoadResult): string =>
      `accepted ${r.accepted} · sold out ${r.soldOut} · busy ${r.busy + r.conflicts} · failed ${r.failed}`;
    const load = await runLoad({
      targets: apps.map((app) => app.url),
      sku: scenario.sku,
      orders: ORDERS,
      concurrencyPerTarget: IN_FLIGHT_PER_PROCESS,
      onProgress: (done, r) => bar.update(done, status(r)),
    });
    bar.finish(ORDERS, status(load));
    for (const failure of load.failures) console.log(`    unexpected answer: ${failure}`);
    const final = await callJson('GET', `${apps[PROCESSES - 1].url}/inventory/${scenario.sku}`);
    return {
      scenario,
      load,
      finalStock: Number(final.body.stock),
      ledgerOrders: Number(final.body.orders),
    };
  } finally {
    await Promise.all(apps.map((app) => app.stop()));
  }
}

function oversold(outcome: Outcome): number {
  return Math.max(0, outcome.load.accepted - INITIAL_STOCK);
}

/** `initial - final - accepted`: 0 when every accepted unit left the stock exactly once. */
function drift(outcome: Outcome): number {
  return INITIAL_STOCK - outcome.finalStock - outcome.load.accepted;
}

function verdictTable(outcomes: readonly Outcome[]): string {
  return renderTable(
    [
      'run',
      'accepted',
      'sold out',
      'busy/conflict',
      'failed',
      'final stock',
      'oversold',
      'initial-final-accepted',
      'ledger',
      'selling time',
      'orders/s',
    ],
    outcomes.map((outcome) => {
      const { load } = outcome;
      return [
        outcome.scenario.label,
        load.accepted,
        load.soldOut,
        load.busy + load.conflicts,
        load.failed,
        outcome.finalStock,
        oversold(outcome),
        drift(outcome),
        outcome.ledgerOrders,
        `${(load.lastAcceptedMs / 1000).toFixed(2)} s`,
        Math.round(load.accepted / Math.max(0.001, load.lastAcceptedMs / 1000)),
      ];
    }),
  );
}

/** Prints what the table means; returns the exit code. */
function explain(
  outcomes: readonly Outcome[],
  sharing: SharingOutcome,
  leadership: LeaderOutcome,
): number {
  const [locked, unlocked, optimistic, segmented] = outcomes;
  const exact = (o: Outcome): boolean =>
    oversold(o) === 0 &&
    drift(o) === 0 &&
    o.ledgerOrders === o.load.accepted &&
    o.load.failed === 0;
  const lines: string[] = [];
  lines.push(
    `@Locked: oversold ${oversold(locked)}, stock exact: ${yes(exact(locked))}.`,
    `No lock: oversold ${oversold(unlocked)} (${unlocked.load.accepted} orders accepted for ${INITIAL_STOCK} units; ` +
      `the stock went down by ${INITIAL_STOCK - unlocked.finalStock}: concurrent read-modify-writes overwrote each other).`,
    `Optimistic: oversold ${oversold(optimistic)}, stock exact: ${yes(exact(optimistic))}` +
      (optimistic.load.conflicts > 0
        ? ` (${optimistic.load.conflicts} orders gave up after too many retries).`
        : '.'),
  );
  const speedup = locked.load.lastAcceptedMs / Math.max(1, segmented.load.lastAcceptedMs);
  lines.push(
    `Segmented: oversold ${oversold(segmented)}, stock exact: ${yes(exact(segmented))}; sold out in ` +
      `${(segmented.load.lastAcceptedMs / 1000).toFixed(2)} s vs ${(locked.load.lastAcceptedMs / 1000).toFixed(2)} s ` +
      `with one lock (${speedup.toFixed(1)}x), ${SEGMENTS} orders in parallel instead of 1.`,
  );
  const shared = explainSharing(sharing);
  lines.push(...shared.lines);
  const led = explainLeader(leadership);
  lines.push(...led.lines);
  const protectedOk = outcomes.filter((o) => o.scenario.safe).every(exact);
  const unlockedOversold = oversold(unlocked) > 0;
  const pass = protectedOk && unlockedOversold && shared.pass && led.pass;
  lines.push(
    '',
    pass
      ? 'VERDICT: PASS. The lock held across processes (oversold 0) and the same load without it oversold; ' +
          'shared reads were never torn, the provider got exactly its limit of calls at once, ' +
          'and the report ran on one leader per tick, then on the other after the leader was killed.'
      : `VERDICT: FAIL. ${protectedOk ? '' : 'A protected run oversold or lost an update. '}` +
          `${unlockedOversold ? '' : 'The unlocked run did not oversell, so this run proved nothing. '}` +
          `${shared.pass ? '' : 'The sharing step failed (see above). '}` +
          `${led.pass ? '' : 'The leadership step failed (see above).'}`,
  );
  console.log(lines.join('\n'));
  return pass ? 0 : 1;
}

function yes(value: boolean): string {
  return value ? 'yes' : 'NO';
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    console.log(`\n${signal}: stopping the app processes and removing ${dir}`);
    void stopAllApps(2_000).finally(() => {
      removeTempFiles();
      process.exit(130);
    });
  });
}
// Whatever happens (an error, process.exit), no child and no temp file outlives the demo.
process.on('exit', () => {
  killAllAppsNow();
  removeTempFiles();
});

main()
  .catch((err: unknown) => {
    if (!interrupted) console.error('\nDemo failed:', err instanceof Error ? err.message : err);
    return 1;
  })
  .then(async (code) => {
    await stopAllApps(2_000);
    removeTempFiles();
    if (!interrupted) process.exit(code);
  });
