import { randomUUID } from 'node:crypto';
import { DataSource, type Logger, type QueryRunner } from 'typeorm';
import {
  compareInterleaved,
  pairedRatio,
  type Variant,
  type VariantRounds,
} from '../harness/rounds';
import { startLocks, type BenchLocks } from '../harness/nest-locks';
import type { Profile } from '../harness/profile';
import { fmt, type ChartPoint, type SuiteResult } from '../harness/result';
import {
  dataSourceOptions,
  dropTable,
  SQL_LOCK_PAIRS,
  type SqlStrategy,
  tempSqliteFile,
  uniqueTableName,
  type DbKind,
} from '../../servers/databases';

/** One database × strategy cell of the matrix. */
type Combo = (typeof SQL_LOCK_PAIRS)[number];

/** One statement as the backend sent it. */
interface Statement {
  sql: string;
  params: unknown[];
  /** The QueryRunner (one pooled connection checkout) it went through. */
  runner: object | undefined;
}

/** The statements of one acquire + release, split at the moment `acquire` resolved. */
interface CapturedCycle {
  acquire: Statement[];
  release: Statement[];
}

/**
 * A TypeORM logger that records the statements while `into` is set. TypeORM calls `logQuery`
 * for every statement (START TRANSACTION and COMMIT included) whatever the logging setting,
 * so this sees exactly what the driver is asked to send. Idle, it costs one property read, and
 * the floor's DataSource gets an idle one too, so both sides pay the same.
 */
class StatementRecorder implements Logger {
  into: Statement[] | undefined;

  logQuery(query: string, parameters?: unknown, queryRunner?: QueryRunner): void {
    this.into?.push({
      sql: query,
      params: Array.isArray(parameters) ? [...(parameters as unknown[])] : [],
      runner: queryRunner,
    });
  }

  logQueryError(): void {
    // errors reach the caller as exceptions
  }
  logQuerySlow(): void {
    // no maxQueryExecutionTime is set
  }
  logSchemaBuild(): void {
    // no synchronize
  }
  logMigration(): void {
    // no migrations
  }
  log(): void {
    // nothing worth keeping
  }
}

/** One statement of the floor, with what changes from one cycle to the next. */
interface Step {
  /** `session`: the connection holding the lock (pinned by ours); `side`: ours' pooled autocommit statements. */
  on: 'session' | 'side';
  /** SQL text split around SQLite's clock literal (the dialect splices the monotonic "now" in). */
  sqlParts: string[];
  params: unknown[];
  /** Parameters carrying the owner token: `before` + fresh token + `after`. */
  tokenParams: Array<{ index: number; before: string; after: string }>;
}

/** What a statement answered: row count, affected rows, and the first row's values. */
interface Answer {
  rows: number;
  affected: number | undefined;
  first: Record<string, string>;
}

/** The answer fields that must come back the same in every cycle (those equal in two checked cycles). */
interface Expected {
  rows: number;
  affected: number | undefined;
  fields: Array<[string, string]>;
}

/** The floor's two dedicated connections. */
interface FloorConnections {
  session: QueryRunner;
  side: QueryRunner;
}

/** What one combination measured. */
interface ComboResult {
  database: DbKind;
  strategy: SqlStrategy;
  /** Statements per cycle (acquire + release). */
  statements: number;
  /** QueryRunners ours checked out of the pool per cycle (each statement's, the pinned one once). */
  checkouts: number;
  /** The captured SQL, in order, with the connection each went to in the floor. */
  sql: Array<{ phase: 'acquire' | 'release'; on: Step['on']; sql: string }>;
  floor: VariantRounds;
  ours: VariantRounds;
  /** Median of per-round ours ÷ floor. */
  ratio: number;
}

/** SQLite's lease clock as the dialect writes it (`SqlDialect.nowMs` on Linux). */
function monotonicMs(): string {
  return String(process.hrtime.bigint() / 1_000_000n);
}

/** A fresh owner token, in the backend's format (128 random bits, 32 hex digits). */
function freshToken(): string {
  return randomUUID().replace(/-/g, '');
}

/**
 * Issue 8, databases: one client acquiring and releasing a free key through the typeorm
 * backend, each strategy on Postgres, MariaDB and SQLite, against a raw floor replaying the very
 * statements that strategy sent for one cycle (captured through a TypeORM logger) on dedicated
 * connections of the same driver. The gap is what the library adds: a pool checkout per
 * statement, the pinned-connection bookkeeping, the lease and handle. No target in the issue.
 */
export async function databasesSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const results: ComboResult[] = [];
  for (const combo of SQL_LOCK_PAIRS) results.push(await measureCombo(combo, profile));
  const points: ChartPoint[] = results.flatMap((r) => [
    { label: `${r.database} ${r.strategy}`, group: 'ours', value: Math.round(r.ours.opsPerSec) },
    { label: `${r.database} ${r.strategy}`, group: 'floor', value: Math.round(r.floor.opsPerSec) },
  ]);
  return {
    id: 'databases',
    title: 'Uncontended acquire + release on SQL databases (typeorm backend)',
    tables: [
      {
        title: 'Uncontended cycle per database and strategy (one client, free key)',
        columns: [
          'Database',
          'Strategy',
          'statements / checkouts',
          'floor cycles/s',
          'ours cycles/s',
          'floor µs/cycle',
          'ours µs/cycle',
          'ours ÷ floor',
        ],
        rows: results.map((r) => [
          r.database,
          r.strategy,
          `${r.statements} / ${r.checkouts}`,
          fmt(r.floor.opsPerSec),
          fmt(r.ours.opsPerSec),
          fmt(r.floor.usPerOp),
          fmt(r.ours.usPerOp),
          fmt(r.ratio),
        ]),
        note:
          'Medians of interleaved rounds; "ours ÷ floor" is the median of per-round ratios (1 = no overhead). ' +
          'Floor: the exact statements (SQL text and parameters, START TRANSACTION and COMMIT included) that the ' +
          'strategy sent for one steady-state acquire + release, captured with a TypeORM logger and replayed through ' +
          'QueryRunner.query on dedicated connections of a second DataSource with the same options: the statements ' +
          'ours runs on its pinned connection (for-update, advisory) go to one connection, its autocommit ones ' +
          '(fence counter, key row) to a second, so transactions keep their extent; table strategy: one connection. ' +
          'A fresh owner token (and, on SQLite, the current monotonic clock literal) is substituted each cycle; ' +
          'every reply is checked against the replies of two cycles verified to take and free the lock. ' +
          '"statements / checkouts": per cycle, and the pool checkouts (QueryRunners) ours used for them, which ' +
          'the floor does not pay (SQLite: TypeORM keeps a single QueryRunner). Servers keep their default ' +
          'durability (Postgres synchronous_commit on, InnoDB flush at each commit, SQLite rollback journal with ' +
          'fsync), so every committing statement waits for the disk and the figures move with disk load. ' +
          'MariaDB takes for-update, whatever its declared type (a MySQL server does not: no FOR UPDATE WAIT n); ' +
          'SQLite runs table only ' +
          '(no row or advisory locks).',
      },
    ],
    targets: [],
    charts: [
      {
        id: 'databases',
        title: 'Uncontended SQL acquire + release (cycles/s, higher is better)',
        valueTitle: 'cycles/s',
        points,
      },
    ],
    data: { results },
    seconds: (performance.now() - started) / 1000,
  };
}

/** Boots ours on a fresh table, captures one cycle, builds the floor, and compares the two. */
async function measureCombo(combo: Combo, profile: Profile): Promise<ComboResult> {
  const { kind, strategy } = combo;
  const label = `${kind} ${strategy}`;
  const tableName = uniqueTableName('bench_db');
  const sqlite = kind === 'sqlite' ? tempSqliteFile() : undefined;
  const options = dataSourceOptions(kind, sqlite ? { sqliteFile: sqlite.file } : {});
  const recorder = new StatementRecorder();
  const key = `bench:db:${randomUUID().slice(0, 8)}`;
  let ours: BenchLocks | undefined;
  let floorSource: DataSource | undefined;
  let failed = true;
  try {
    // The floor's DataSource first: it doubles as the probe that the server answers. A failed
    // bootstrap inside startLocks would not reach us: Nest's default abortOnError exits the
    // process (silently, with logger: false).
    floorSource = new DataSource({
      ...options,
      logger: new StatementRecorder(),
    } as unknown as ConstructorParameters<typeof DataSource>[0]);
    try {
      await floorSource.initialize();
    } catch (err) {
      throw new Error(
        `databases: cannot connect for ${label} (${(err as Error).message}); is the server up? Run bash scripts/ensure-services.sh`,
        { cause: err },
      );
    }
    ours = await startLocks({
      backends: {
        db: {
          type: 'typeorm',
          dataSourceOptions: { ...options, logger: recorder },
          strategy,
          tableName,
          createTable: true,
        },
      },
    });
    const locks = ours.locks;
    const cycle = async (): Promise<void> => {
      const lock = await locks.acquire(key);
      await lock.release();
    };

    // The first cycle creates the table, the key row and the fence row: capture two steady ones
    // after it, apart by a few ms so that SQLite's clock literal differs between them.
    // A statement of the backend's own that lands in a capture (its start-up sweep of rows
    // left by dead holders runs once, beside the first cycles) makes two captures differ: take
    // captures until two in a row agree on their statement counts (compile refuses otherwise).
    await cycle();
    let first = await capture(recorder, locks, key);
    let second = first;
    for (let attempt = 0; attempt < 5; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 3));
      second = await capture(recorder, locks, key);
      const steady =
        first.acquire.length === second.acquire.length &&
        first.release.length === second.release.length;
      if (steady) break;
      first = second;
    }
    const captureClock = Number(monotonicMs());
    const steps = compile(first, second, captureClock, label);
    const acquireSteps = steps.slice(0, second.acquire.length);
    const releaseSteps = steps.slice(second.acquire.length);

    const connections: FloorConnections = {
      session: floorSource.createQueryRunner(),
      side: floorSource.createQueryRunner(),
    };
    await connections.session.connect();
    await connections.side.connect();

    // Two cycles checked from outside (through ours' isLocked): the replayed acquire takes the
    // lock, the replayed release frees it. Their replies become the expectation for every
    // measured cycle, so a floor that silently stopped locking would throw, not look fast.
    const checked: Answer[][] = [];
    for (let i = 0; i < 2; i++) {
      const token = freshToken();
      const answers = await replay(acquireSteps, connections, token);
      if (!(await locks.isLocked(key)))
        throw new Error(`databases: ${label} floor: the replayed acquire did not take the lock`);
      answers.push(...(await replay(releaseSteps, connections, token)));
      if (await locks.isLocked(key))
        throw new Error(`databases: ${label} floor: the replayed release left the lock held`);
      checked.push(answers);
    }
    const expected = checked[0].map((answer, i) => stableFields(answer, checked[1][i]));

    const variants: Variant[] = [
      {
        name: 'raw floor (same SQL, dedicated connections)',
        op: async () => {
          const token = freshToken();
          const answers = await replay(steps, connections, token);
          for (let i = 0; i < answers.length; i++) check(answers[i], expected[i], steps[i], label);
        },
      },
      { name: 'ours (LockService.acquire + release)', op: cycle },
    ];
    const [floor, oursResult] = await compareInterleaved(variants, profile);
    if (await locks.isLocked(key))
      throw new Error(`databases: ${label}: the lock was left held after the measured rounds`);
    failed = false;
    const all = [...second.acquire, ...second.release];
    return {
      database: kind,
      strategy,
      statements: all.length,
      checkouts: new Set(all.map((s) => s.runner)).size,
      sql: steps.map((step, i) => ({
        phase: i < acquireSteps.length ? 'acquire' : 'release',
        on: step.on,
        sql: step.sqlParts.join('<now>'),
      })),
      floor,
      ours: oursResult,
      ratio: pairedRatio(oursResult, floor),
    };
  } finally {
    await teardown(
      [
        // Connections first: MariaDB's DROP TABLE waits on open sessions' metadata locks.
        () => ours?.close(),
        async () => {
          if (floorSource?.isInitialized) await floorSource.destroy();
        },
        () => dropTable(kind, tableName, sqlite?.file),
        () => sqlite?.cleanup(),
      ],
      failed,
    );
  }
}

/**
 * Runs every step even when one fails; rethrows the first failure only when the measurement
 * itself succeeded, so a teardown error never hides the error that got us here.
 */
async function teardown(
  steps: ReadonlyArray<() => Promise<unknown> | unknown>,
  failed: boolean,
): Promise<void> {
  let firstError: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      firstError ??= err;
    }
  }
  if (firstError !== undefined && !failed) throw firstError;
}

/** Records the statements of one acquire + release of ours. */
async function capture(
  recorder: StatementRecorder,
  locks: BenchLocks['locks'],
  key: string,
): Promise<CapturedCycle> {
  const cycle: CapturedCycle = { acquire: [], release: [] };
  try {
    recorder.into = cycle.acquire;
    const lock = await locks.acquire(key);
    recorder.into = cycle.release;
    await lock.release();
  } finally {
    recorder.into = undefined;
  }
  return cycle;
}

/**
 * Turns two captured cycles into replay steps. What differs between them is per-cycle state and
 * must be renewed on replay: a string parameter differing in a run of hex digits is the owner
 * token; a number in the SQL text differing is SQLite's clock literal (checked to be the
 * monotonic clock). Anything else differing is unexpected and fails loudly.
 */
function compile(a: CapturedCycle, b: CapturedCycle, clockMs: number, label: string): Step[] {
  const all = (c: CapturedCycle): Statement[] => [...c.acquire, ...c.release];
  const [first, second] = [all(a), all(b)];
  if (a.acquire.length !== b.acquire.length || first.length !== second.length) {
    const list = (c: Statement[]): string => c.map((s) => `  ${s.sql.slice(0, 160)}`).join('\n');
    throw new Error(
      `databases: ${label}: two steady cycles sent different statement counts:\n` +
        `first (${a.acquire.length} to acquire):\n${list(first)}\n` +
        `second (${b.acquire.length} to acquire):\n${list(second)}`,
    );
  }
  // The lock's own connection is the one used in both phases (pinned for-update/advisory);
  // the table strategy has none: every statement is autocommit on any pooled connection.
  const releaseRunners = new Set(b.release.map((s) => s.runner));
  const session = b.acquire.find((s) => releaseRunners.has(s.runner))?.runner;
  return second.map((stmt, i) => {
    const before = first[i];
    const textA = before.sql.split(/(\d+)/);
    const textB = stmt.sql.split(/(\d+)/);
    const sqlParts: string[] = [''];
    if (textA.length !== textB.length)
      throw new Error(`databases: ${label}: statement ${i} changed between cycles: ${stmt.sql}`);
    for (let j = 0; j < textB.length; j++) {
      if (textA[j] === textB[j]) {
        sqlParts[sqlParts.length - 1] += textB[j];
      } else if (j % 2 === 1 && Math.abs(Number(textB[j]) - clockMs) < 60_000) {
        sqlParts.push('');
      } else {
        throw new Error(`databases: ${label}: statement ${i} changed between cycles: ${stmt.sql}`);
      }
    }
    if (stmt.params.length !== before.params.length)
      throw new Error(`databases: ${label}: statement ${i} changed its parameters: ${stmt.sql}`);
    const tokenParams: Step['tokenParams'] = [];
    stmt.params.forEach((value, index) => {
      const old = before.params[index];
      if (value === old) return;
      const run = typeof value === 'string' && typeof old === 'string' && tokenRun(old, value);
      if (!run) throw new Error(`databases: ${label}: parameter ${index} of "${stmt.sql}" changed`);
      tokenParams.push({ index, before: value.slice(0, run[0]), after: value.slice(run[1]) });
    });
    return {
      on: session !== undefined && stmt.runner === session ? 'session' : 'side',
      sqlParts,
      params: stmt.params,
      tokenParams,
    };
  });
}

/**
 * Where the owner token sits in `b`, given the same parameter `a` of another cycle: the run of
 * hex digits around the characters that differ, 32 long (our token format), or `undefined`.
 */
function tokenRun(a: string, b: string): [number, number] | undefined {
  if (a.length !== b.length) return undefined;
  let start = 0;
  while (a[start] === b[start]) start++;
  let end = b.length;
  while (a[end - 1] === b[end - 1]) end--;
  const hex = /[0-9a-f]/;
  while (start > 0 && hex.test(b[start - 1])) start--;
  while (end < b.length && hex.test(b[end])) end++;
  return end - start === 32 ? [start, end] : undefined;
}

/** Replays steps in order on the floor's connections, with `token` as the owner token. */
async function replay(
  steps: readonly Step[],
  connections: FloorConnections,
  token: string,
): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const step of steps) {
    const sql = step.sqlParts.length === 1 ? step.sqlParts[0] : step.sqlParts.join(monotonicMs());
    let params = step.params;
    if (step.tokenParams.length > 0) {
      params = [...params];
      for (const t of step.tokenParams) params[t.index] = t.before + token + t.after;
    }
    const result = await connections[step.on].query(sql, params, true);
    const records = result.records as Array<Record<string, unknown>>;
    const first: Record<string, string> = {};
    if (records.length > 0) for (const [k, v] of Object.entries(records[0])) first[k] = String(v);
    answers.push({ rows: records.length, affected: result.affected, first });
  }
  return answers;
}

/** The parts of an answer that were the same in two checked cycles (fences are not). */
function stableFields(a: Answer, b: Answer): Expected {
  return {
    rows: a.rows === b.rows ? b.rows : -1,
    affected: a.affected === b.affected ? b.affected : undefined,
    fields: Object.entries(b.first).filter(([k, v]) => a.first[k] === v),
  };
}

/** Throws when a measured floor statement answered differently from the checked cycles. */
function check(answer: Answer, expected: Expected, step: Step, label: string): void {
  const same =
    (expected.rows === -1 || answer.rows === expected.rows) &&
    (expected.affected === undefined || answer.affected === expected.affected) &&
    expected.fields.every(([k, v]) => answer.first[k] === v);
  if (!same) {
    throw new Error(
      `databases: ${label} floor: "${step.sqlParts.join('<now>')}" answered ${JSON.stringify(answer)}, expected ${JSON.stringify(expected)}`,
    );
  }
}
