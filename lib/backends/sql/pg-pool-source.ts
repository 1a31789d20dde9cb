import { PooledRunner } from './pooled-runner';
import type { SqlDataSource, SqlResult } from './typeorm-types';

/*
 * A `pg` Pool seen through the backend's SQL port (the DataSource / QueryRunner shape that
 * typeorm-types.ts describes): a runner is one pooled client while connected, statements go
 * to it as written (PostgreSQL `$n` placeholders), results come back as TypeORM's structured
 * ones. The pool stays the app's: the backend never ends it.
 */

/** The parts of a `pg` Pool the port uses (pg 8). */
export interface PgPool {
  connect(): Promise<PgPoolClient>;
  readonly options: { max?: number };
  readonly totalCount: number;
  readonly idleCount: number;
}

/** A client checked out of a `pg` Pool. */
export interface PgPoolClient {
  query(sql: string, params?: unknown[]): Promise<PgQueryResult>;
  /** Back to the pool; with an error, the pool drops the client instead. */
  release(err?: Error | boolean): void;
  readonly processID?: number;
}

/** What `pg` answers a statement with. */
interface PgQueryResult {
  readonly rows?: Array<Record<string, unknown>>;
  readonly rowCount?: number | null;
  readonly command?: string;
}

/** Whether `value` looks like a `pg` Pool (duck-typed: `pg` is an optional peer). */
export function isPgPool(value: unknown): value is PgPool {
  const pool = value as Partial<PgPool> | null;
  return (
    typeof pool === 'object' &&
    pool !== null &&
    typeof pool.connect === 'function' &&
    typeof (pool as { query?: unknown }).query === 'function' &&
    typeof pool.totalCount === 'number' &&
    typeof pool.idleCount === 'number' &&
    typeof pool.options === 'object'
  );
}

const sources = new WeakMap<PgPool, SqlDataSource>();

/** The port over `pool` (one per pool, so every look at a configuration finds the same). */
export function pgPoolSource(pool: PgPool): SqlDataSource {
  let source = sources.get(pool);
  if (!source) {
    source = {
      isInitialized: true,
      options: { type: 'postgres', poolSize: pool.options.max ?? PG_DEFAULT_MAX },
      initialize: () => Promise.resolve(),
      // The app's pool: closing the backend leaves it open.
      destroy: () => Promise.resolve(),
      createQueryRunner: () => new PgPoolRunner(pool),
      // Where the release listener finds the pool whose options it connects with.
      driver: { master: pool },
    };
    sources.set(pool, source);
  }
  return source;
}

/** `pg`'s default pool size. */
const PG_DEFAULT_MAX = 10;

/** One pooled client while connected. */
class PgPoolRunner extends PooledRunner<PgPoolClient> {
  constructor(private readonly pool: PgPool) {
    super();
  }

  async startTransaction(isolationLevel?: 'READ COMMITTED'): Promise<void> {
    await this.query(
      isolationLevel ? `START TRANSACTION ISOLATION LEVEL ${isolationLevel}` : 'START TRANSACTION',
      [],
    );
  }

  protected checkOut(): Promise<PgPoolClient> {
    return this.pool.connect();
  }

  protected async send(
    client: PgPoolClient,
    sql: string,
    parameters: unknown[] | undefined,
  ): Promise<SqlResult> {
    const raw = await client.query(sql, parameters);
    return {
      records: raw.rows ?? [],
      ...(typeof raw.rowCount === 'number' ? { affected: raw.rowCount } : {}),
      raw:
        raw.command === 'DELETE' || raw.command === 'UPDATE' ? [raw.rows, raw.rowCount] : raw.rows,
    };
  }

  protected giveBack(client: PgPoolClient): void {
    // A client whose connection was closed (discarded by the backend) is dropped, not reused.
    client.release((client as { _ending?: boolean })._ending === true || undefined);
  }
}
