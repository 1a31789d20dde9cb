import { LockBackendError } from '../../errors/lock.errors';
import { SqlDialect } from './sql-dialect';
import type { SqlDataSource, SqlResult } from './typeorm-types';

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
      this.tableReady ??= this.execOn(ds, this.dialect.createTable(this.table), []).then(
        () => undefined,
        (err: unknown) => {
          // Postgres: CREATE TABLE IF NOT EXISTS racing another process fails on the catalog's
          // unique index (23505) or as "already exists" (42P07): the table is there either way.
          if (createRaceLost(err)) return;
          throw err;
        },
      );
      this.tableReady.catch(() => (this.tableReady = undefined));
      await this.tableReady;
    }
    return ds;
  }

  /** Runs one statement on a pooled connection (autocommit). */
  async exec(sql: string, params: unknown[]): Promise<SqlResult> {
    return this.execOn(await this.get(), sql, params);
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
  return code === '23505' || code === '42P07';
}
