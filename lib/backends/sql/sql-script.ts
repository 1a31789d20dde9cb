import { setImmediate as turnOfEventLoop } from 'node:timers/promises';
import { sleep } from '../../core/shared/timers';
import { LockBackendError } from '../../errors/lock.errors';
import { isDeadlock } from './driver-errors';
import { affectedRows, type SqlDatabase } from './sql-database';

/** One statement of a {@link SqlScript}: `?` placeholders, every value a parameter. */
export interface SqlStep {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** What a statement of a {@link SqlScript} gave back. */
export interface SqlStepResult {
  /** Rows read (a `SELECT`, or a write with `RETURNING`). */
  readonly records: ReadonlyArray<Record<string, unknown>>;
  /** Rows written. */
  readonly affected: number;
}

/**
 * Statements that must run as one atomic unit, written once for every database: a generator that
 * yields each statement and receives its result, so a later statement can depend on what an
 * earlier one read. Its return value is the script's.
 */
export type SqlScript<T> = Generator<SqlStep, T, SqlStepResult>;

/** Runs of a script the server rolled back to break a deadlock, at most. */
const DEADLOCK_ATTEMPTS = 5;

/**
 * Runs the script made by `make` atomically: on PostgreSQL and MariaDB/MySQL in one READ
 * COMMITTED transaction on a pooled connection (the script takes its row locks itself, `FOR
 * UPDATE`); a run the server rolled back to break a deadlock runs again from the start. On
 * SQLite in one `BEGIN IMMEDIATE` transaction of better-sqlite3, run synchronously: SQLite has
 * one writer at a time across processes, and TypeORM shares one connection among all its query
 * runners, so a TypeORM transaction there would take in whatever other statement of the app ran
 * while it awaited; a synchronous one lets nothing in.
 */
export async function runScript<T>(db: SqlDatabase, make: () => SqlScript<T>): Promise<T> {
  if (db.dialect.family === 'sqlite') return runOnSqlite(db, make());
  try {
    return await retryDeadlocks(() => runInTransaction(db, make()));
  } catch (err) {
    throw db.explain(err);
  }
}

/**
 * Runs `work` again (a few times, after a short random pause) when the server rolled it back to
 * break a deadlock: rolled back, it did nothing. Deadlocks arise between a key's mutex take and
 * the transactions of shared and counted holders of a key of the same fence bucket, which lock
 * the same rows in a different order on MariaDB (its gap locks) or PostgreSQL.
 */
export async function retryDeadlocks<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isDeadlock(err) || attempt >= DEADLOCK_ATTEMPTS) throw err;
      await sleep(Math.random() * 5 * attempt);
    }
  }
}

async function runInTransaction<T>(db: SqlDatabase, script: SqlScript<T>): Promise<T> {
  const runner = db.connection();
  // PostgreSQL takes the isolation level in its BEGIN: one round trip, where TypeORM sends two.
  const pg = db.dialect.family === 'postgres';
  try {
    if (pg) await runner.query('BEGIN ISOLATION LEVEL READ COMMITTED', [], true);
    else await runner.startTransaction('READ COMMITTED');
    try {
      let step = script.next();
      while (!step.done) {
        const result = await runner.query(
          db.dialect.sql(step.value.sql),
          [...step.value.params],
          true,
        );
        step = script.next({ records: result.records, affected: affectedRows(result) });
      }
      await (pg ? runner.query('COMMIT', [], true) : runner.commitTransaction());
      return step.value;
    } catch (err) {
      await (pg ? runner.query('ROLLBACK', [], true) : runner.rollbackTransaction()).catch(
        () => undefined,
      );
      throw err;
    }
  } finally {
    await runner.release();
  }
}

/** The parts of a better-sqlite3 `Database` a script uses. */
interface BetterSqlite {
  prepare(sql: string): {
    readonly reader: boolean;
    all(...params: unknown[]): Array<Record<string, unknown>>;
    run(...params: unknown[]): { changes: number };
  };
  transaction<R>(fn: () => R): { immediate(): R };
}

async function runOnSqlite<T>(db: SqlDatabase, script: SqlScript<T>): Promise<T> {
  const raw = (db.dataSource.driver as { databaseConnection?: unknown } | undefined)
    ?.databaseConnection as Partial<BetterSqlite> | undefined;
  if (typeof raw?.transaction !== 'function' || typeof raw.prepare !== 'function') {
    throw new LockBackendError(
      db.backendName,
      'shared and counted locks on SQLite need the better-sqlite3 driver (type "better-sqlite3")',
    );
  }
  const sqlite = raw as BetterSqlite;
  // As SqlDatabase.exec: a synchronous run must let the timers (renewals) in between.
  await turnOfEventLoop();
  try {
    return sqlite
      .transaction(() => {
        let step = script.next();
        while (!step.done) {
          const statement = sqlite.prepare(step.value.sql);
          const params = [...step.value.params];
          step = script.next(
            statement.reader ? read(statement.all(...params)) : written(statement.run(...params)),
          );
        }
        return step.value;
      })
      .immediate();
  } catch (err) {
    throw db.explain(err);
  }
}

/** A read's (or a `RETURNING` write's) result: the rows, each a row written. */
function read(records: Array<Record<string, unknown>>): SqlStepResult {
  return { records, affected: records.length };
}

/** A write's result. */
function written({ changes }: { changes: number }): SqlStepResult {
  return { records: [], affected: changes };
}
