import { sleep } from '../../core/shared/timers';
import { isCreateRaceLost } from './driver-errors';
import { collectRows, prepareFences } from './fence-setup';
import { SqlDatabase, type SqlDatabaseOptions } from './sql-database';
import { SqlDialect, type SqlFamily } from './sql-dialect';
import { readServer, type SqlServer } from './sql-server';
import type { SqlDataSource } from './typeorm-types';

/** Attempts at creating the lock table while other processes race to create it. */
const CREATE_ATTEMPTS = 10;

/** A DataSource found, and the SQL family it speaks (checked as supported by the strategy). */
export interface FoundDataSource {
  readonly dataSource: SqlDataSource;
  readonly family: SqlFamily;
}

/** How a {@link SqlSource} finds and treats its DataSource. */
export interface SqlSourceOptions extends SqlDatabaseOptions {
  /**
   * Finds the DataSource (a DataSource from Nest DI may not exist yet when the lock module
   * boots) and checks that the strategy runs on its declared type; called until it succeeds.
   */
  readonly find: () => FoundDataSource | Promise<FoundDataSource>;
  /** Checks that the strategy runs on the server found (throws `LockConfigError`). */
  readonly checkServer: (server: SqlServer, family: SqlFamily) => void;
  /** Create the lock table on first use. */
  readonly createTable: boolean;
  /** The module created the DataSource, so it closes it. */
  readonly owned: boolean;
}

/**
 * The backend's access to its DataSource: found lazily, initialized if needed, the server behind
 * it asked what it is (and checked), its SQL family (and so the dialect and the quoted table
 * name) known from then on, and closed only if the module created it. Also creates the lock
 * table on first use when the user opted in. A failure is never cached: the next call tries
 * again, so a database that was down answers as soon as it is back.
 */
export class SqlSource {
  private database?: Promise<SqlDatabase>;
  private tableReady?: Promise<void>;
  private fencesReady?: Promise<void>;
  /** The background removal of rows no longer needed, started once the fences are ready. */
  private collecting?: Promise<void>;
  private closing = false;
  /** The DataSource once found: closed (if ours) even when opening it failed half-way. */
  private dataSource?: SqlDataSource;

  constructor(private readonly options: SqlSourceOptions) {}

  /** The database, connected and checked (no table work). */
  connect(): Promise<SqlDatabase> {
    if (!this.database) {
      const database = (async () => {
        const { dataSource, family } = await this.options.find();
        this.dataSource = dataSource;
        if (!dataSource.isInitialized) await dataSource.initialize();
        const server = await readServer(dataSource, family);
        this.options.checkServer(server, family);
        return new SqlDatabase(dataSource, new SqlDialect(family), server, this.options);
      })();
      this.database = database;
      database.catch(() => {
        if (this.database === database) this.database = undefined; // retry on the next call
      });
    }
    return this.database;
  }

  /**
   * The database, ready for statements: the lock table (when we create it) exists, and its
   * fence buckets match this backend's count (see fence-setup.ts).
   */
  async open(): Promise<SqlDatabase> {
    const db = await this.connect();
    if (this.options.createTable) {
      if (!this.tableReady) {
        const ready = createTableOnce(db);
        this.tableReady = ready;
        ready.catch(() => {
          if (this.tableReady === ready) this.tableReady = undefined;
        });
      }
      await this.tableReady;
    }
    if (!this.fencesReady) {
      const ready = this.prepareFences(db);
      this.fencesReady = ready;
      ready.catch(() => {
        if (this.fencesReady === ready) this.fencesReady = undefined;
      });
    }
    await this.fencesReady;
    return db;
  }

  /** Closes the DataSource if the module created it (after any opening still under way). */
  async close(): Promise<void> {
    this.closing = true;
    await this.collecting;
    if (!this.options.owned) return;
    await this.database?.catch(() => undefined);
    if (this.dataSource?.isInitialized) await this.dataSource.destroy();
  }

  /**
   * Sets the fence buckets up, then removes the rows that no longer need to be kept in the
   * background (rows of holders that died; the first lock call does not wait for them). A
   * failed removal is left for the next start: nothing depends on it.
   */
  private async prepareFences(db: SqlDatabase): Promise<void> {
    const floor = await prepareFences(db);
    this.collecting ??= collectRows(db, floor, () => this.closing).then(
      () => undefined,
      () => undefined,
    );
  }
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
      if (!isCreateRaceLost(err) || attempt >= CREATE_ATTEMPTS) throw err;
      await sleep(20 * attempt + Math.random() * 20);
    }
  }
}
