/**
 * `type: 'sql'` with the client an app already runs: a bare `pg` Pool, `mysql2` pool or
 * `better-sqlite3` Database (the whole battery runs on each in test/conformance/sql-*.spec.ts),
 * or a TypeORM DataSource (the same backend as `typeorm`).
 * Misconfiguration is refused before any I/O, naming `client`; the module never ends the
 * app's pool.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { LockConfigError } from '../../lib/errors/lock.errors';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import {
  dataSourceOptions,
  dropTable,
  newMysql2Pool,
  newPgPool,
  tempSqliteFile,
  uniqueTableName,
} from '../../servers/databases';
import { createLockApp } from '../support/lock-app';

const pool = newPgPool({ max: 4 });
const tables: string[] = [];
afterAll(async () => {
  for (const table of tables) await dropTable('postgres', table).catch(() => undefined);
  await pool.end();
});

function sqlOptions(client: unknown, extra: Record<string, unknown> = {}): LockModuleOptions {
  const tableName = uniqueTableName('sqlc');
  tables.push(tableName);
  return {
    backends: { db: { type: 'sql', client, tableName, createTable: true, ...extra } as never },
  };
}

describe("type: 'sql' on the app's own client", () => {
  it('locks on a pg Pool, fenced, and leaves the pool to the app when it closes', async () => {
    const t = await createLockApp(sqlOptions(pool, { strategy: 'advisory' }));
    const first = await t.locks.acquire('order:1');
    expect(await t.locks.tryAcquire('order:1')).toBeNull();
    await first.release();
    const second = await t.locks.acquire('order:1');
    expect(second.fence).toBeGreaterThan(first.fence!);
    await second.release();
    await t.close();
    // The app's pool still serves the app.
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
    expect(rows).toEqual([{ one: 1 }]);
  });

  it('locks on a mysql2 promise pool (MariaDB) and leaves the pool to the app when it closes', async () => {
    const mysql = newMysql2Pool({ connectionLimit: 4, promise: true });
    try {
      const t = await createLockApp(sqlOptions(mysql.client, { strategy: 'for-update' }));
      const first = await t.locks.acquire('order:3');
      expect(await t.locks.tryAcquire('order:3')).toBeNull();
      await first.release();
      const second = await t.locks.acquire('order:3');
      expect(second.fence).toBeGreaterThan(first.fence!);
      await second.release();
      await t.close();
      const [rows] = (await (mysql.client as { query(sql: string): Promise<[unknown[]]> }).query(
        'SELECT 1 AS one',
      )) as [unknown[]];
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await dropTable('mariadb', tables.pop()!).catch(() => undefined);
      await mysql.end();
    }
  });

  it('locks on a better-sqlite3 Database and leaves it open when the app closes', async () => {
    const temp = tempSqliteFile();
    const Database = createRequire(join(process.cwd(), 'package.json'))('better-sqlite3') as new (
      file: string,
    ) => { close(): void; prepare(sql: string): { get(): unknown }; readonly open: boolean };
    const database = new Database(temp.file);
    try {
      const t = await createLockApp(sqlOptions(database));
      const first = await t.locks.acquire('order:4');
      expect(await t.locks.tryAcquire('order:4')).toBeNull();
      await first.release();
      const second = await t.locks.acquire('order:4');
      expect(second.fence).toBeGreaterThan(first.fence!);
      await second.release();
      await t.close();
      expect(database.open).toBe(true);
      expect(database.prepare('SELECT 1 AS one').get()).toEqual({ one: 1 });
    } finally {
      tables.pop();
      database.close();
      temp.cleanup();
    }
  });

  it('takes a TypeORM DataSource as client: the same backend as type typeorm', async () => {
    const ds = new DataSource(
      dataSourceOptions('postgres', { poolSize: 3 }) as unknown as DataSourceOptions,
    );
    await ds.initialize();
    try {
      const t = await createLockApp(sqlOptions(ds, { strategy: 'table' }));
      const lock = await t.locks.acquire('order:2');
      expect(lock.fence).toBeGreaterThan(0);
      await lock.release();
      await t.close();
      expect(ds.isInitialized).toBe(true);
    } finally {
      await ds.destroy();
    }
  });

  it('refuses, naming the field, a client of no known kind and options of the typeorm backend', async () => {
    const refused = async (options: LockModuleOptions): Promise<LockConfigError> => {
      const err = await createLockApp(options).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LockConfigError);
      return err as LockConfigError;
    };
    expect((await refused(sqlOptions({ query: () => undefined }))).field).toBe(
      'backends.db.client',
    );
    expect((await refused(sqlOptions(undefined))).field).toBe('backends.db.client');
    expect(
      (await refused(sqlOptions(pool, { dataSourceOptions: dataSourceOptions('postgres') }))).field,
    ).toBe('backends.db.client');
    expect((await refused(sqlOptions(pool, { strategy: 'row' }))).field).toBe(
      'backends.db.strategy',
    );
    expect((await refused(sqlOptions(pool, { startup: 'degraded' }))).field).toBe(
      'backends.db.startup',
    );
  });
});
