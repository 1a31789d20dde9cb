import { setImmediate as turnOfEventLoop } from 'node:timers/promises';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { LockBackendError } from '../../errors/lock.errors';
import { FenceLayout } from './fence-layout';
import { SqlDialect, storedKey } from './sql-dialect';
import type { SqlServer } from './sql-server';
import type { SqlDataSource, SqlResult, SqlRunner } from './typeorm-types';

/** What a {@link SqlDatabase} needs besides its DataSource. */
export interface SqlDatabaseOptions {
  /** Unquoted, validated lock table name. */
  readonly tableName: string;
  /** The backend's name, for errors. */
  readonly backendName: string;
  /** Scrubs the configuration's secrets from the errors the backend builds itself. */
  readonly redactor: SecretRedactor;
  /** Number of fence buckets (`fenceBuckets`). */
  readonly fenceBuckets: number;
}

/**
 * An open DataSource with its dialect, the server behind it and the lock table: runs statements
 * on pooled connections and knows the key rows every row-locking strategy needs.
 */
export class SqlDatabase {
  /** Quoted table name. */
  readonly table: string;
  /** Unquoted table name (as the migration and `regclass` lookups want it). */
  readonly tableName: string;
  /** How keys map to fence counter rows. */
  readonly fences: FenceLayout;
  /** The backend's name, for errors. */
  readonly backendName: string;
  private readonly redactor: SecretRedactor;

  constructor(
    readonly dataSource: SqlDataSource,
    readonly dialect: SqlDialect,
    /** What the server said about itself when the database was opened. */
    readonly server: SqlServer,
    options: SqlDatabaseOptions,
  ) {
    this.tableName = options.tableName;
    this.table = dialect.quote(options.tableName);
    this.fences = new FenceLayout(options.fenceBuckets);
    this.backendName = options.backendName;
    this.redactor = options.redactor;
  }

  /** A new (unconnected) connection of the pool. */
  connection(): SqlRunner {
    return this.dataSource.createQueryRunner();
  }

  /** Runs one statement on a pooled connection (autocommit). */
  async exec(sql: string, params: unknown[]): Promise<SqlResult> {
    // better-sqlite3 runs a statement synchronously, so a run of lock calls would settle in
    // microtasks alone and starve the timers (lease renewals among them) until it ends: each
    // statement first lets the event loop turn.
    if (this.dialect.family === 'sqlite') await turnOfEventLoop();
    const runner = this.connection();
    try {
      return await runner.query(this.dialect.sql(sql), params, true);
    } catch (err) {
      throw this.explain(err);
    } finally {
      await runner.release();
    }
  }

  /** Whether the row of `key` exists (a plain read: it never waits for a row lock). */
  async rowExists(key: string, runner?: SqlRunner): Promise<boolean> {
    const result = await this.run(
      `SELECT 1 AS present FROM ${this.table} WHERE lock_key = ?`,
      [storedKey(key)],
      runner,
    );
    return result.records.length > 0;
  }

  /**
   * Makes the (free) row of `key` if it is missing, on `runner` (the lock's own connection), in
   * autocommit; `true` when this call made it. MariaDB/MySQL look first with a plain read: on
   * InnoDB an INSERT IGNORE of an existing row waits for whoever holds it FOR UPDATE (bounded
   * by the session's `innodb_lock_wait_timeout`); PostgreSQL's ON CONFLICT DO NOTHING never
   * waits for a row lock, so it needs no read first. Driver errors (a deadlock among inserts
   * of the same row, a lock wait timeout) reach the caller as they are.
   */
  async createRowIfMissing(key: string, runner: SqlRunner): Promise<boolean> {
    if (this.dialect.family !== 'postgres' && (await this.rowExists(key, runner))) return false;
    const insert = this.dialect.insertIgnore(this.table, ['lock_key', 'key_text', 'fence']);
    return affectedRows(await this.run(insert, [storedKey(key), key, 0], runner)) === 1;
  }

  /** One statement on `runner` if given (autocommit unless it is in a transaction), else {@link exec}. */
  private async run(sql: string, params: unknown[], runner?: SqlRunner): Promise<SqlResult> {
    if (!runner) return this.exec(sql, params);
    return runner.query(this.dialect.sql(sql), params, true);
  }

  /**
   * Adds the fix to a missing-table error (as a `LockBackendError` whose message and cause are
   * redacted); other errors pass through for the engine to wrap and redact.
   */
  explain(err: unknown): unknown {
    const message = (err as Error)?.message ?? '';
    if (
      /does not exist|doesn't exist|no such table/i.test(message) &&
      message.includes(this.tableName)
    ) {
      return new LockBackendError(
        this.backendName,
        `lock table ${this.table} does not exist: run the shipped migration, or set createTable: true (${this.redactor.message(err)})`,
        { cause: this.redactor.error(err) },
      );
    }
    return err;
  }

  /** A driver error as a redacted text, for reasons the backend reports itself. */
  describe(err: unknown): string {
    return this.redactor.message(err);
  }
}

/** Rows changed by a statement, from TypeORM's structured result. */
export function affectedRows(result: SqlResult): number {
  if (typeof result.affected === 'number') return result.affected;
  const raw = result.raw as
    { affectedRows?: number; changes?: number; rowCount?: number } | undefined;
  return raw?.affectedRows ?? raw?.changes ?? raw?.rowCount ?? result.records.length;
}

/** `true`/`1`/`'1'` from either driver. */
export function truthy(value: unknown): boolean {
  return value === true || Number(value) === 1;
}
