import { PooledRunner } from './pooled-runner';
import type { SqlDataSource, SqlResult } from './typeorm-types';

/*
 * A `mysql2` pool (callback or promise API) seen through the backend's SQL port (the
 * DataSource / QueryRunner shape that typeorm-types.ts describes), for MariaDB and MySQL: a
 * runner is one pooled connection while connected, statements go to it as written (`?`
 * placeholders), results come back as TypeORM's structured ones. The promise API is used
 * through the callback pool it wraps. The pool stays the app's: the backend never ends it.
 */

/** The parts of a `mysql2` (callback) pool the port uses. */
export interface Mysql2Pool {
  getConnection(callback: (err: Error | null, connection: Mysql2Connection) => void): void;
  readonly config: { readonly connectionLimit?: number };
}

/** A connection checked out of a `mysql2` pool. */
export interface Mysql2Connection {
  query(
    sql: string,
    values: unknown[] | undefined,
    callback: (err: Error | null, result: unknown) => void,
  ): unknown;
  /** Back to the pool. */
  release(): void;
  /** Closes it: the pool drops it. */
  destroy(): void;
  readonly threadId?: number;
}

/**
 * The callback pool of `value` if it is a `mysql2` pool, of either API (duck-typed: `mysql2`
 * is an optional peer); `undefined` otherwise.
 */
export function mysql2PoolOf(value: unknown): Mysql2Pool | undefined {
  const isCallbackPool = (v: unknown): v is Mysql2Pool => {
    const pool = v as { getConnection?: unknown; promise?: unknown; config?: unknown } | null;
    return (
      typeof pool === 'object' &&
      pool !== null &&
      typeof pool.getConnection === 'function' &&
      typeof pool.promise === 'function' &&
      typeof pool.config === 'object' &&
      pool.config !== null &&
      'connectionLimit' in pool.config
    );
  };
  if (isCallbackPool(value)) return value;
  const wrapped = (value as { pool?: unknown } | null)?.pool;
  return isCallbackPool(wrapped) ? wrapped : undefined;
}

const sources = new WeakMap<Mysql2Pool, SqlDataSource>();

/** The port over `pool` (one per pool, so every look at a configuration finds the same). */
export function mysql2PoolSource(pool: Mysql2Pool): SqlDataSource {
  let source = sources.get(pool);
  if (!source) {
    source = {
      isInitialized: true,
      // The server tells MariaDB from MySQL when the backend first connects.
      options: { type: 'mysql', poolSize: pool.config.connectionLimit ?? MYSQL2_DEFAULT_LIMIT },
      initialize: () => Promise.resolve(),
      // The app's pool: closing the backend leaves it open.
      destroy: () => Promise.resolve(),
      createQueryRunner: () => new Mysql2PoolRunner(pool),
    };
    sources.set(pool, source);
  }
  return source;
}

/** `mysql2`'s default `connectionLimit`. */
const MYSQL2_DEFAULT_LIMIT = 10;

/** One pooled connection while connected. */
class Mysql2PoolRunner extends PooledRunner<Mysql2Connection> {
  constructor(private readonly pool: Mysql2Pool) {
    super();
  }

  async startTransaction(isolationLevel?: 'READ COMMITTED'): Promise<void> {
    if (isolationLevel) await this.query(`SET TRANSACTION ISOLATION LEVEL ${isolationLevel}`, []);
    await this.query('START TRANSACTION', []);
  }

  protected checkOut(): Promise<Mysql2Connection> {
    return new Promise((resolve, reject) =>
      this.pool.getConnection((err, connection) => (err ? reject(err) : resolve(connection))),
    );
  }

  protected async send(
    connection: Mysql2Connection,
    sql: string,
    parameters: unknown[] | undefined,
  ): Promise<SqlResult> {
    const raw = await new Promise<unknown>((resolve, reject) =>
      connection.query(sql, parameters, (err, result) => (err ? reject(err) : resolve(result))),
    );
    const header = raw as { affectedRows?: unknown } | null;
    return {
      records: Array.isArray(raw) ? (raw as Array<Record<string, unknown>>) : [],
      ...(typeof header?.affectedRows === 'number' ? { affected: header.affectedRows } : {}),
      raw,
    };
  }

  protected giveBack(connection: Mysql2Connection): void {
    // A connection the backend destroyed has left the pool already: this does nothing then.
    connection.release();
  }
}
