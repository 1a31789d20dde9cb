import type { DataSource } from 'typeorm';

/** One statement of an atomic write, with `?` placeholders. */
export interface SqlStep {
  sql: string;
  params: ReadonlyArray<string | number | null>;
  /** The step must change exactly one row, otherwise the whole write is rolled back. */
  mustChangeOneRow?: boolean;
}

/** The part of a better-sqlite3 statement used here. */
interface SqliteStatement {
  run(...params: ReadonlyArray<string | number | null>): { changes: number };
}

/** The part of a better-sqlite3 connection used here (the package ships no type declarations). */
interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  transaction(fn: () => void): { immediate(): void };
}

/** Thrown inside a SQLite transaction to roll it back; never escapes this file. */
const ROLL_BACK = Symbol('roll back');

/**
 * Runs a few statements as one transaction: all of them, or none when a guarded step changes
 * no row (its condition failed: stale fence, stale version, not enough stock).
 *
 * On SQLite the transaction runs synchronously on better-sqlite3's own connection: TypeORM's
 * async transactions would keep the database write-locked across `await`s, during which other
 * requests of this process (and the lock backend, which shares the connection) could slip
 * their statements into it. A synchronous transaction cannot be interleaved, and holds the
 * file's write lock for microseconds. Postgres and MariaDB use a pooled connection of its own.
 */
export class AtomicWriter {
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(private readonly dataSource: DataSource) {}

  /** Resolves `true` when every step ran, `false` when a guarded step changed no row. */
  async write(steps: readonly SqlStep[]): Promise<boolean> {
    const type = this.dataSource.options.type;
    if (type === 'better-sqlite3') return this.writeSqlite(steps);
    return this.writePooled(steps, type === 'postgres');
  }

  private writeSqlite(steps: readonly SqlStep[]): boolean {
    const { databaseConnection } = this.dataSource.driver as unknown as {
      databaseConnection: SqliteConnection;
    };
    const transaction = databaseConnection.transaction(() => {
      for (const step of steps) {
        const { changes } = this.prepared(databaseConnection, step.sql).run(...step.params);
        if (step.mustChangeOneRow && changes !== 1) throw ROLL_BACK;
      }
    });
    try {
      // IMMEDIATE takes the write lock up front: a deferred transaction that reads first and
      // then upgrades can fail at once with SQLITE_BUSY instead of waiting its turn.
      transaction.immediate();
      return true;
    } catch (err) {
      if (err === ROLL_BACK) return false;
      throw err;
    }
  }

  private async writePooled(steps: readonly SqlStep[], postgres: boolean): Promise<boolean> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      for (const step of steps) {
        const sql = postgres ? numberedPlaceholders(step.sql) : step.sql;
        const result = await runner.query(sql, [...step.params], true);
        if (step.mustChangeOneRow && result.affected !== 1) {
          await runner.rollbackTransaction();
          return false;
        }
      }
      await runner.commitTransaction();
      return true;
    } catch (err) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    } finally {
      await runner.release();
    }
  }

  private prepared(connection: SqliteConnection, sql: string): SqliteStatement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = connection.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/** `?` placeholders to Postgres's `$1..$n` (our SQL has no `?` anywhere else). */
function numberedPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}
