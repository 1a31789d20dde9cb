import type { SqlDataSource, SqlResult, SqlRunner } from './typeorm-types';

/*
 * A `better-sqlite3` Database seen through the backend's SQL port (the DataSource / QueryRunner
 * shape that typeorm-types.ts describes), as TypeORM's own driver sees it: one connection that
 * every runner shares, statements run synchronously (`?` placeholders), results as TypeORM's
 * structured ones. Transactions of several statements run on the Database itself
 * (sql-script.ts), as the driver's `databaseConnection`. The database stays the app's: the
 * backend never closes it.
 */

/** The parts of a `better-sqlite3` Database the port uses. */
export interface BetterSqlite3Database {
  prepare(sql: string): BetterSqlite3Statement;
  transaction(fn: () => unknown): unknown;
  readonly open: boolean;
  readonly inTransaction: boolean;
  readonly name: string;
}

/** A prepared statement. */
interface BetterSqlite3Statement {
  readonly reader: boolean;
  all(...params: unknown[]): Array<Record<string, unknown>>;
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

/** Whether `value` looks like a `better-sqlite3` Database (duck-typed: an optional peer). */
export function isBetterSqlite3(value: unknown): value is BetterSqlite3Database {
  const db = value as Partial<BetterSqlite3Database> | null;
  return (
    typeof db === 'object' &&
    db !== null &&
    typeof db.prepare === 'function' &&
    typeof db.transaction === 'function' &&
    typeof db.open === 'boolean' &&
    typeof db.inTransaction === 'boolean'
  );
}

const sources = new WeakMap<BetterSqlite3Database, SqlDataSource>();

/** The port over `database` (one per database, so every look at a configuration finds the same). */
export function betterSqlite3Source(database: BetterSqlite3Database): SqlDataSource {
  let source = sources.get(database);
  if (!source) {
    source = {
      isInitialized: true,
      options: { type: 'better-sqlite3', poolSize: 1 },
      initialize: () => Promise.resolve(),
      // The app's database: closing the backend leaves it open.
      destroy: () => Promise.resolve(),
      createQueryRunner: () => new BetterSqlite3Runner(database),
      driver: { databaseConnection: database },
    };
    sources.set(database, source);
  }
  return source;
}

/** A runner on the one connection (nothing to check out or give back). */
class BetterSqlite3Runner implements SqlRunner {
  isReleased = false;

  constructor(private readonly database: BetterSqlite3Database) {}

  get databaseConnection(): unknown {
    return this.database;
  }

  connect(): Promise<unknown> {
    return Promise.resolve(this.database);
  }

  release(): Promise<void> {
    this.isReleased = true;
    return Promise.resolve();
  }

  query(sql: string, parameters: unknown[] | undefined): Promise<SqlResult> {
    try {
      const statement = this.database.prepare(sql);
      const params = (parameters ?? []).map((p) => (typeof p === 'boolean' ? Number(p) : p));
      if (statement.reader) {
        const records = statement.all(...params);
        return Promise.resolve({ records, raw: records });
      }
      const written = statement.run(...params);
      return Promise.resolve({
        records: [],
        affected: written.changes,
        raw: written.lastInsertRowid,
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async startTransaction(): Promise<void> {
    await this.query('BEGIN TRANSACTION', []);
  }

  async commitTransaction(): Promise<void> {
    await this.query('COMMIT', []);
  }

  async rollbackTransaction(): Promise<void> {
    await this.query('ROLLBACK', []);
  }
}
