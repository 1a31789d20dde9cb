/**
 * The parts of TypeORM (0.3 / 1.x) the backend uses, typed locally: `typeorm` is an optional
 * peer, and both its CommonJS and ESM builds may be in play, so nothing here relies on
 * `instanceof` of its classes.
 */

/** Structured result of `QueryRunner.query(sql, params, true)`. */
export interface SqlResult {
  records: Array<Record<string, unknown>>;
  affected?: number;
  raw: unknown;
}

/** A TypeORM QueryRunner (one pooled connection while connected). */
export interface SqlRunner {
  connect(): Promise<unknown>;
  release(): Promise<void>;
  query(sql: string, parameters: unknown[] | undefined, structured: true): Promise<SqlResult>;
  /** `isolationLevel`: e.g. `'READ COMMITTED'`; the DataSource's default when absent. */
  startTransaction(isolationLevel?: 'READ COMMITTED'): Promise<void>;
  commitTransaction(): Promise<void>;
  rollbackTransaction(): Promise<void>;
  readonly isReleased: boolean;
  /** The driver connection (pg `Client` / mysql2 connection) once connected. */
  readonly databaseConnection?: unknown;
}

/** A TypeORM DataSource. */
export interface SqlDataSource {
  readonly isInitialized: boolean;
  readonly options: {
    type: string;
    poolSize?: number;
    extra?: Record<string, unknown>;
    isolationLevel?: string;
  };
  initialize(): Promise<unknown>;
  destroy(): Promise<void>;
  createQueryRunner(): SqlRunner;
  /** The TypeORM driver (PostgreSQL: its `pg` Pool is `driver.master`), read by duck typing. */
  readonly driver?: unknown;
}
