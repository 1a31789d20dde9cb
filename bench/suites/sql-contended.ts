import { randomBytes } from 'node:crypto';
import type { LockModuleOptions } from '../../lib';
import { dropTable, dataSourceOptions, uniqueTableName } from '../../servers/databases';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { runHandoffs, type ContendedResult, type HandoffSetup } from '../harness/contended';
import { contendedChart, contendedTable } from '../harness/contended-table';
import { watchPgConnections, type PgConnectionPeak } from '../harness/pg-connections';
import type { Profile, SqlContendedProfile } from '../harness/profile';
import { fmt, type BenchTable, type SuiteResult } from '../harness/result';
import {
  floorTable,
  isSqlContender,
  prepareSqlTables,
  SQL_CONTENDERS,
  sqlRoundTripMs,
  type SqlContenderName,
  type SqlKind,
} from '../harness/sql-contenders';
import { runWaitersOn, WAITER_DEFAULTS, WAITER_HOLD_MS, type WaitersRun } from '../harness/waiters';

/** Ours on both databases and strategies that wait, each beside its database's raw floor. */
const CONTENDERS = Object.keys(SQL_CONTENDERS) as SqlContenderName[];
/**
 * A critical section doing a little work of its own: long enough that a polling waiter's
 * back-off grows past a few ms while it waits (as it would in a service), so what a release
 * notification saves shows; the lock's own commits (a few ms each on a disk that syncs) still
 * fit a few times in it.
 */
const HOLD_MS = 20;
/**
 * Twice a hold: a released key goes to a process that waits for it rather than back to the one
 * that released it (with a short think the releaser takes it again before a polling waiter's
 * back-off ends, and polling shows only as unfairness), while the other workers' holds together
 * outlast it, so someone still waits at each release.
 */
const THINK_MS = 40;
/** The pool the pinned-connections run gives its backend (TypeORM `poolSize`, pg `max`). */
const PIN_POOL = 4;
/**
 * Listening connections a `for-update` backend opens beside its pool: none (only PostgreSQL
 * `table` listens for releases, one connection per backend).
 */
const PIN_LISTENERS = 0;
/** `maxWaitingConnections` of each pinned-connections run: the default, and never waiting. */
const PIN_CAPS: ReadonlyArray<number | undefined> = [undefined, 0];

/** One pinned-connections run: the waiters' figures, and what the database saw of them. */
interface PinnedRun extends WaitersRun {
  /** `maxWaitingConnections`; `undefined`: the default. */
  cap: number | undefined;
  peak: PgConnectionPeak;
}

/**
 * Issue 18, item 3, on the contended benchmark. (a) One key handed over between worker
 * processes, one waiter each: PostgreSQL `table` woken by `LISTEN`/`NOTIFY` against the same
 * with `releaseNotifications: false` (polling), `for-update` on PostgreSQL and MariaDB, and each
 * database's raw `SELECT ... FOR UPDATE` queue for reference: notifications should cut the idle
 * gap between a release and the next grant. (b) Many waiters of one key in one process on a
 * pool of 4 (`for-update`): the connections they hold, seen by PostgreSQL, stay within the pool
 * (the suite fails otherwise), and only the head of the key's line waits in the database.
 */
export async function sqlContendedSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const setup = profile.sqlContended;
  const table = uniqueTableName('bench_sqlc');
  const kinds: SqlKind[] = ['postgres', 'mariadb'];
  try {
    const roundTripMs: Record<SqlKind, number> = { postgres: NaN, mariadb: NaN };
    for (const kind of kinds) {
      await prepareSqlTables(kind, table);
      roundTripMs[kind] = await sqlRoundTripMs(kind);
    }
    const handoff: HandoffSetup = {
      workers: setup.workers,
      holdMs: HOLD_MS,
      thinkMs: THINK_MS,
      durationMs: setup.handoffMs,
      repeats: 1,
    };
    const { runs, results } = await runHandoffs(
      CONTENDERS,
      { redisUrl: MACHINE_REDIS_URL, sqlTable: table },
      (contender) => roundTripMs[SQL_CONTENDERS[contender].kind],
      handoff,
    );
    const pinned: PinnedRun[] = [];
    for (const cap of PIN_CAPS) pinned.push(await runPinned(table, cap, setup));
    return {
      id: 'sql-contended',
      title: `Contended SQL: hand-off between ${setup.workers} processes, and the connections waiters pin`,
      tables: [handoffTable(handoff, results, roundTripMs), pinnedTable(setup, pinned)],
      targets: [],
      charts: [
        contendedChart(
          'sql-contended',
          `Contended SQL hand-off, ${setup.workers} processes (locked ops/s)`,
          results,
        ),
      ],
      data: { roundTripMs, ...handoff, runs, pinned },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    for (const kind of kinds) {
      await dropTable(kind, table);
      await dropTable(kind, floorTable(table));
    }
  }
}

/**
 * `waiters` waiters of one key in one process, `for-update` on PostgreSQL with a pool of
 * {@link PIN_POOL} and `maxWaitingConnections: cap`, while a connection of the bench's own
 * counts the backend's connections in `pg_stat_activity` (by its `application_name`). More than
 * the pool (plus listeners) fails the suite; none seen means the count is broken and fails too.
 */
async function runPinned(
  table: string,
  cap: number | undefined,
  setup: SqlContendedProfile,
): Promise<PinnedRun> {
  const applicationName = `ndl-bench-pin-${randomBytes(4).toString('hex')}`;
  const options: LockModuleOptions = {
    backends: {
      db: {
        type: 'typeorm',
        dataSourceOptions: dataSourceOptions('postgres', { poolSize: PIN_POOL, applicationName }),
        strategy: 'for-update',
        tableName: table,
        ...(cap === undefined ? {} : { maxWaitingConnections: cap }),
      },
    },
    defaults: WAITER_DEFAULTS,
    keyPrefix: `bench:pin:${applicationName}:`,
  };
  const watch = await watchPgConnections(applicationName);
  let run: WaitersRun | undefined;
  let failure: unknown;
  try {
    run = await runWaitersOn(options, setup.waiters, 1, setup.waitersMs);
  } catch (err) {
    failure = err;
  }
  let peak: PgConnectionPeak;
  try {
    peak = await watch.stop(); // stopped either way
  } catch (err) {
    throw run ? err : failure; // the run's own failure says more
  }
  if (!run) throw failure;
  const bound = PIN_POOL + PIN_LISTENERS;
  if (peak.connections === 0) {
    throw new Error(
      `sql-contended: no connection of ${applicationName} seen in ${peak.samples} samples of pg_stat_activity`,
    );
  }
  if (peak.connections > bound) {
    throw new Error(
      `sql-contended: ${setup.waiters} for-update waiters held ${peak.connections} connections, more than the pool of ${PIN_POOL} (+ ${PIN_LISTENERS} listening)`,
    );
  }
  return { cap, ...run, peak };
}

function handoffTable(
  handoff: HandoffSetup,
  results: readonly ContendedResult[],
  roundTripMs: Record<SqlKind, number>,
): BenchTable {
  return contendedTable(
    `Contended hand-off on SQL: ${handoff.workers} worker processes, one key, hold ${handoff.holdMs} ms, think ${handoff.thinkMs} ms`,
    results,
    (r) => (isSqlContender(r.contender) ? roundTripMs[SQL_CONTENDERS[r.contender].kind] : NaN),
    `One run of ${handoff.durationMs / 1000} s per lock, the first 10% left out as ramp-up; ` +
      'each worker process has one waiter, which takes the key, holds it, releases it and thinks ' +
      '(twice a hold, so the key goes to a waiting process rather than back to the releaser) ' +
      'before asking again. Round trip: the median `SELECT 1` on an idle connection of that ' +
      'database. Wait: asked → granted. The idle gap (below) is the time the key sat free or ' +
      'committing (the release and the next take each commit, and a commit waits for the disk: ' +
      'servers keep their default durability). Release notifications cut the part spent ' +
      'waiting to look: a notified `table` waiter tries again when the release is announced, a ' +
      'polling one (`releaseNotifications: false`, as on MariaDB and SQLite) when its back-off ' +
      '(5–250 ms) ends, and the releaser may come back first, which shows in the wait tail and ' +
      'in sections per worker. Statements per section: every statement all workers sent ' +
      "(failed tries and reads of waiting workers included; not the listener's LISTEN), over " +
      'the sections granted; every process hears every release of the table, so each notified ' +
      'waiter tries once per release. `for-update` waiters queue in the database on one ' +
      'connection per process and key. The raw floors are a transaction per section on a ' +
      'dedicated connection (`SELECT … FOR UPDATE` of a key row that stays; no fence, lease or ' +
      'loss detection).',
  );
}

function pinnedTable(setup: SqlContendedProfile, pinned: readonly PinnedRun[]): BenchTable {
  return {
    title: `Connections pinned by waiters: ${setup.waiters} waiters of one key in one process, PostgreSQL for-update, pool of ${PIN_POOL}`,
    columns: [
      'maxWaitingConnections',
      'locked ops/s',
      'wait p50 / p99 / max (ms)',
      'connections open / in use (max)',
      'waiting in the database (max)',
      'sections per waiter (min–max)',
    ],
    rows: pinned.map((r) => [
      r.cap === undefined
        ? 'default (1 on a pool of 4)'
        : r.cap === 0
          ? '0 (never waits in the database)'
          : String(r.cap),
      fmt(r.opsPerSec),
      `${fmt(r.waitMs.p50)} / ${fmt(r.waitMs.p99)} / ${fmt(r.waitMs.max)}`,
      `${r.peak.connections} / ${r.peak.inUse} (pool ${PIN_POOL})`,
      String(r.peak.waitingInDatabase),
      `${r.minPerWaiter}–${r.maxPerWaiter}`,
    ]),
    note:
      `One run of ${setup.waitersMs / 1000} s each, the first 10% left out; every waiter holds ` +
      `the key ${WAITER_HOLD_MS} ms and asks again at once. Counted from a separate connection ` +
      'in `pg_stat_activity` (by `application_name`) every 10 ms over the whole run, warm-up ' +
      "included. Open: the backend's connections, idle ones in its pool too; the suite fails if " +
      'they ever exceed the pool (a `for-update` backend opens no listening connection). In ' +
      'use: those not idle (a statement running or waiting, or a transaction open, as the ' +
      "holder's is). Waiting in the database: those blocked on a lock (`wait_event_type = " +
      "Lock`: the head's `SELECT … FOR UPDATE`, or a statement that touches the holder's row " +
      'while it commits), the most at once. Only the head of the key’s line in the process waits ' +
      'in the database; the other waiters wait in process, on no connection. Before issue 18 ' +
      'each waiter pinned a pooled connection for its whole wait, so 32 waiters on a pool of 4 ' +
      'left none for the holders and ordinary queries. `maxWaitingConnections` bounds the ' +
      'connections waiting across keys; with one key at most one waits whatever the cap (≥ 1), ' +
      'so `1` is the default row here; `0`: the head never waits in the database, it tries and ' +
      'sleeps until this process frees the key or its back-off ends.',
  };
}
