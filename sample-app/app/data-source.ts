import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { AppConfig, DatabaseConfig } from './app-config';
import { OrderEntry } from './order.entity';
import { Price } from './price.entity';
import { Product } from './product.entity';
import { StockSegment } from './stock-segment.entity';

/**
 * How long a SQLite statement waits for another process's write to finish before failing.
 * better-sqlite3 waits synchronously, so it must stay short compared with request timeouts,
 * yet every write here lasts well under a millisecond.
 */
const SQLITE_BUSY_TIMEOUT_MS = 5_000;
const SCHEMA_ATTEMPTS = 5;

/**
 * TypeORM connection options for one database. SQLite gets WAL (readers never block the
 * writer) and a busy timeout, so several app processes can share the file.
 */
export function connectionOptions(db: DatabaseConfig, poolSize = 10): DataSourceOptions {
  switch (db.kind) {
    case 'sqlite':
      return {
        type: 'better-sqlite3',
        database: db.file,
        enableWAL: true,
        timeout: SQLITE_BUSY_TIMEOUT_MS,
      };
    case 'postgres':
    case 'mariadb':
      return {
        type: db.kind,
        host: db.host,
        port: db.port,
        username: db.user,
        // An empty password would make `pg` attempt password auth; leave it out instead.
        ...(db.password === '' ? {} : { password: db.password }),
        database: db.database,
        poolSize,
      };
  }
}

/**
 * Opens the product store and creates its tables if they are missing. Several processes may
 * start at once on one database and race to create the same tables; the loser's error is
 * retried, by which time the tables exist.
 */
export async function openStore(config: AppConfig): Promise<DataSource> {
  const dataSource = new DataSource({
    ...connectionOptions(config.store),
    entities: [Product, StockSegment, OrderEntry, Price],
    entityPrefix: config.tablePrefix,
    synchronize: false,
  });
  // Opening SQLite switches it to WAL, which needs a moment alone with the file: another
  // process starting at the same instant makes it fail with SQLITE_BUSY, so retry that too.
  for (let attempt = 1; ; attempt++) {
    try {
      await dataSource.initialize();
      break;
    } catch (err) {
      if (attempt >= SCHEMA_ATTEMPTS || (err as { code?: unknown }).code !== 'SQLITE_BUSY')
        throw err;
      await sleep(50 + Math.random() * 200);
    }
  }
  for (let attempt = 1; ; attempt++) {
    try {
      await dataSource.synchronize();
      return dataSource;
    } catch (err) {
      if (attempt >= SCHEMA_ATTEMPTS) {
        await dataSource.destroy().catch(() => undefined);
        throw err;
      }
      await sleep(50 + Math.random() * 200);
    }
  }
}
