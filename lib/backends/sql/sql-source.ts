import { LockBackendError } from '../../errors/lock.errors';
import { sleep } from '../../core/shared/timers';
import { SqlDialect } from './sql-dialect';
import type { SqlDataSource, SqlResult } from './typeorm-types';

/** Attempts at creating the lock table while other processes race to create it. */
const CREATE_ATTEMPTS = 10;

/**
 * The backend's access to its DataSource: resolved lazily (a DataSource from Nest DI may not
 * exist yet when the lock module boots), initialized if needed, and closed only if the module
 * created it. Also creates the lock table on first use when the user opted in.
 */
export class SqlSource {
  private dataSource?: Promise<SqlDataSource>;
  private tableReady?: Promise<void>;

  constructor(
    private readonly resolve: () => SqlDataSource | Promise<SqlDataSource>,
    readonly dialect: SqlDialect,
    /** Quoted table name. */
    readonly table: string,
    private readonly createTable: boolean,
    private readonly owned: boolean,
    private readonly backendName: string,
  ) {}

  /** The initialized DataSource (and the lock table, when we create it). */
  async get(): Promise<SqlDataSource> {
    this.dataSource ??= (async () => {
      const ds = await this.resolve();
      if (!ds.isInitialized) await ds.initialize();
      return ds;
    })();
    this.dataSource.catch(() => (this.dataSource = undefined)); // retry on the next call
    const ds = await this.dataSource;
    if (this.createTable) {
      this.tableReady ??= this.createTableOnce(ds);
      this.tableReady.catch(() => (this.tableReady = undefined));
      await this.tableReady;
    }
    return ds;
  }

  /**
   * CREATE TABLE IF NOT EXISTS, safe when several processes start at once: on Postgres the
   * losers of that race fail on the catalog (23505 / 42P07 / 42710) while the winner has not
   * committed yet, so they retry until the statement is a no-op.
   */
  private async createTableOnce(ds: SqlDataSource): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.execOn(ds, this.dialect.createTable(this.table), []);
        return;
      } catch (err) {
        if (!createRaceLost(err) || attempt >= CREATE_ATTEMPTS) throw err;
        await sleep(20 * attempt + Math.random() * 20);
      }
    }
  }

  /** Runs one statement on a pooled connection (autocommit). */
  async exec(sql: string, params: unknown[]): Promise<SqlResult> {
    return this.execOn(await this.get(), sql, params);
  }

  /** One trivial statement: the database answers. */
  async ping(): Promise<void> {
    await this.exec('SELECT 1 AS up', []);
  }

  /** Closes the DataSource if the module created it. */
  async close(): Promise<void> {
    if (!this.owned || !this.dataSource) return;
    const ds = await this.dataSource.catch(() => undefined);
    if (ds?.isInitialized) await ds.destroy();
  }

  private async execOn(ds: SqlDataSource, sql: string, params: unknown[]): Promise<SqlResult> {
    const runner = ds.createQueryRunner();
    try {
      return await runner.query(this.dialect.sql(sql), params, true);
    } catch (err) {
      throw this.explain(err);
    } finally {
      await runner.release();
    }
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

/** Errors meaning another session created the table first. */
function createRaceLost(err: unknown): boolean {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.code ?? e?.driverError?.code;
  return code === '23505' || code === '42P07' || code === '42710';
}
