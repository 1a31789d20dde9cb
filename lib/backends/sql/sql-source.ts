import { LockBackendError } from '../../errors/lock.errors';
import { sleep } from '../../core/shared/timers';
import { SqlDialect, storedKey, type SqlFamily } from './sql-dialect';
import type { SqlDataSource, SqlResult, SqlRunner } from './typeorm-types';

/** Attempts at creating the lock table while other processes race to create it. */
const CREATE_ATTEMPTS = 10;

/** A DataSource found, and the SQL family it speaks (checked as supported by the strategy). */
export interface FoundDataSource {
  readonly dataSource: SqlDataSource;
  readonly family: SqlFamily;
}

/** How a {@link SqlSource} finds and treats its DataSource. */
export interface SqlSourceOptions {
  /**
   * Finds the DataSource (a DataSource from Nest DI may not exist yet when the lock module
   * boots) and checks that the strategy runs on it; called until it succeeds.
   */
  readonly find: () => FoundDataSource | Promise<FoundDataSource>;
  /** Unquoted, validated lock table name. */
  readonly tableName: string;
  /** Create the lock table on first use. */
  readonly createTable: boolean;
  /** The module created the DataSource, so it closes it. */
  readonly owned: boolean;
  /** The backend's name, for errors. */
  readonly backendName: string;
}

/**
 * The backend's access to its DataSource: found lazily, initialized if needed, its SQL family
 * (and so the dialect and the quoted table name) known from then on, and closed only if the
 * module created it. Also creates the lock table on first use when the user opted in.
 */
export class SqlSource {
  private database?: Promise<SqlDatabase>;
  private tableReady?: Promise<void>;

  constructor(private readonly options: SqlSourceOptions) {}

  /** The database, ready for statements (and the lock table, when we create it). */
  async open(): Promise<SqlDatabase> {
    this.database ??= (async () => {
      const { dataSource, family } = await this.options.find();
      if (!dataSource.isInitialized) await dataSource.initialize();
      return new SqlDatabase(dataSource, new SqlDialect(family), this.options);
    })();
    this.database.catch(() => (this.database = undefined)); // retry on the next call
    const db = await this.database;
    if (this.options.createTable) {
      this.tableReady ??= createTableOnce(db);
      this.tableReady.catch(() => (this.tableReady = undefined));
      await this.tableReady;
    }
    return db;
  }

  /** Closes the DataSource if the module created it. */
  async close(): Promise<void> {
    if (!this.options.owned || !this.database) return;
    const db = await this.database.catch(() => undefined);
    if (db?.dataSource.isInitialized) await db.dataSource.destroy();
  }
}

/**
 * An open DataSource with its dialect and lock table: runs statements on pooled connections and
 * knows the key rows every row-locking strategy needs.
 */
export class SqlDatabase {
  /** Quoted table name. */
  readonly table: string;
  private readonly backendName: string;

  constructor(
    readonly dataSource: SqlDataSource,
    readonly dialect: SqlDialect,
    options: Pick<SqlSourceOptions, 'tableName' | 'backendName'>,
  ) {
    this.table = dialect.quote(options.tableName);
    this.backendName = options.backendName;
  }

  /** A new (unconnected) connection of the pool. */
  connection(): SqlRunner {
    return this.dataSource.createQueryRunner();
  }

  /** Runs one statement on a pooled connection (autocommit). */
  async exec(sql: string, params: unknown[]): Promise<SqlResult> {
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
  async rowExists(key: string): Promise<boolean> {
    const result = await this.exec(`SELECT 1 AS present FROM ${this.table} WHERE lock_key = ?`, [
      storedKey(key),
    ]);
    return result.records.length > 0;
  }

  /**
   * Makes sure the (free) row of `key` exists; `true` when it was missing. Looks first with a
   * plain read: on InnoDB an INSERT IGNORE of an existing row waits for whoever holds it
   * FOR UPDATE.
   */
  async createRowIfMissing(key: string): Promise<boolean> {
    if (await this.rowExists(key)) return false;
    await this.exec(this.dialect.insertIgnore(this.table, ['lock_key', 'key_text', 'fence']), [
      storedKey(key),
      key,
      0,
    ]);
    return true;
  }

  /** Adds the fix to a missing-table error; other errors pass through. */
  explain(err: unknown): unknown {
    const message = (err as Error)?.message ?? '';
    if (
      /does not exist|doesn't exist|no such table/i.test(message) &&
      message.includes(this.table.slice(1, -1))
    ) {
      return new LockBackendError(
        this.backendName,
        `lock table ${this.table} does not exist: run the shipped migration, or set createTable: true (${message})`,
        { cause: err },
      );
    }
    return err;
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

/**
 * CREATE TABLE IF NOT EXISTS, safe when several processes start at once: on Postgres the
 * losers of that race fail on the catalog (23505 / 42P07 / 42710) while the winner has not
 * committed yet, so they retry until the statement is a no-op.
 */
async function createTableOnce(db: SqlDatabase): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.exec(db.dialect.createTable(db.table), []);
      return;
    } catch (err) {
      if (!createRaceLost(err) || attempt >= CREATE_ATTEMPTS) throw err;
      await sleep(20 * attempt + Math.random() * 20);
    }
  }
}

/** Errors meaning another session created the table first. */
function createRaceLost(err: unknown): boolean {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.code ?? e?.driverError?.code;
  return code === '23505' || code === '42P07' || code === '42710';
}
