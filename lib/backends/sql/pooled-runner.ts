import type { SqlResult, SqlRunner } from './typeorm-types';

/**
 * A runner of the SQL port over one connection of a driver's own pool (pg-pool-source.ts,
 * mysql2-pool-source.ts): checked out by its first statement (or `connect`), given back once by
 * `release` (dropped by the pool instead when it was closed). What differs per driver is how a
 * connection is checked out, sent a statement and given back.
 */
export abstract class PooledRunner<Connection> implements SqlRunner {
  private connection?: Connection;
  private connecting?: Promise<Connection>;
  isReleased = false;

  /** The driver connection while checked out (its session id and events are read from it). */
  get databaseConnection(): unknown {
    return this.connection;
  }

  async connect(): Promise<Connection> {
    if (this.connection) return this.connection;
    this.connecting ??= this.checkOut().then((connection) => (this.connection = connection));
    return this.connecting;
  }

  async release(): Promise<void> {
    if (this.isReleased) return;
    this.isReleased = true;
    const connection = this.connection ?? (await this.connecting?.catch(() => undefined));
    if (connection !== undefined) this.giveBack(connection);
  }

  async query(sql: string, parameters: unknown[] | undefined): Promise<SqlResult> {
    return this.send(await this.connect(), sql, parameters);
  }

  abstract startTransaction(isolationLevel?: 'READ COMMITTED'): Promise<void>;

  async commitTransaction(): Promise<void> {
    await this.query('COMMIT', []);
  }

  async rollbackTransaction(): Promise<void> {
    await this.query('ROLLBACK', []);
  }

  /** A connection of the pool. */
  protected abstract checkOut(): Promise<Connection>;
  /** Runs one statement on `connection`, answered as TypeORM's structured result. */
  protected abstract send(
    connection: Connection,
    sql: string,
    parameters: unknown[] | undefined,
  ): Promise<SqlResult>;
  /** Gives `connection` back to the pool (which drops it if it was closed). */
  protected abstract giveBack(connection: Connection): void;
}
