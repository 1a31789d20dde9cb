// Proves servers/databases.ts against the real servers (scripts/ensure-services.sh), and pins
// down what TypeORM 1.x returns for UPDATE/DELETE on each driver (the SQL backends rely on it).
import { describe, it, expect, afterEach } from '@jest/globals';
import { DataSource, type DataSourceOptions, type QueryRunner } from 'typeorm';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  dataSourceOptions,
  dropTable,
  killConnections,
  scratchTable,
  tempSqliteFile,
  uniqueTableName,
  type DbKind,
  type TestDataSourceOptions,
} from './databases';

const KINDS: readonly DbKind[] = ['postgres', 'mariadb', 'sqlite'];

/** Everything a test opened, closed after it even when it fails. */
const openSources: DataSource[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const ds of openSources.splice(0)) {
    if (ds.isInitialized) await ds.destroy().catch(() => undefined);
  }
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function open(options: TestDataSourceOptions): Promise<DataSource> {
  const ds = new DataSource(options as unknown as DataSourceOptions);
  openSources.push(ds);
  await ds.initialize();
  return ds;
}

/** Options for `kind`; a sqlite temp file is removed after the test. */
function optionsFor(kind: DbKind, opts: Parameters<typeof dataSourceOptions>[1] = {}) {
  const options = dataSourceOptions(kind, opts);
  if (options.cleanup) cleanups.push(options.cleanup);
  return options;
}

/** Whether `table` exists in the test database of `ds`. */
async function tableExists(kind: DbKind, ds: DataSource, table: string): Promise<boolean> {
  const sql = {
    postgres: 'SELECT count(*)::int AS n FROM pg_tables WHERE tablename = $1',
    mariadb:
      'SELECT count(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?',
    sqlite: "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?",
  }[kind];
  const rows: { n: number | string }[] = await ds.query(sql, [table]);
  return Number(rows[0]?.n) === 1;
}

/** `$1` on postgres, `?` elsewhere. */
const param = (kind: DbKind, index: number): string => (kind === 'postgres' ? `$${index}` : '?');

describe('dataSourceOptions', () => {
  it.each(KINDS)('%s: TypeORM connects and runs SELECT 1', async (kind) => {
    const ds = await open(optionsFor(kind));
    const rows: { one: number | string }[] = await ds.query('SELECT 1 AS one');
    expect(Number(rows[0]?.one)).toBe(1);
    await ds.destroy();
    expect(ds.isInitialized).toBe(false);
  });

  it('reads the environment overrides and the pool size', () => {
    const saved = { PGPORT: process.env.PGPORT, MYSQL_USER: process.env.MYSQL_USER };
    try {
      process.env.PGPORT = '6543';
      process.env.MYSQL_USER = 'someone';
      expect(dataSourceOptions('postgres', { poolSize: 3 })).toMatchObject({
        type: 'postgres',
        host: '127.0.0.1',
        port: 6543,
        database: 'locktest',
        poolSize: 3,
      });
      expect(dataSourceOptions('mariadb')).toMatchObject({ username: 'someone', poolSize: 10 });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    expect(() => dataSourceOptions('postgres', { poolSize: 0 })).toThrow(/poolSize/);
  });

  it.each(['postgres', 'mariadb'] as const)(
    '%s: poolSize bounds the concurrent connections',
    async (kind) => {
      const ds = await open(optionsFor(kind, { poolSize: 2 }));
      const sleepSql = kind === 'postgres' ? 'SELECT pg_sleep(0.3)' : 'SELECT SLEEP(0.3)';
      const started = Date.now();
      await Promise.all([1, 2, 3, 4].map(() => ds.query(sleepSql)));
      // 4 sleeps on 2 connections: two rounds (4 connections would take one)
      expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    },
  );

  it('sqlite: a temp file by default, removed by cleanup(); a given file is used as is', async () => {
    const options = dataSourceOptions('sqlite');
    expect(Object.keys(options)).not.toContain('cleanup'); // TypeORM sees plain options
    const file = String(options.database);
    const ds = await open(options);
    await ds.query('CREATE TABLE t (k TEXT)');
    expect(existsSync(file)).toBe(true);
    await ds.destroy();
    options.cleanup?.();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(dirname(file))).toBe(false);

    expect(dataSourceOptions('sqlite', { sqliteFile: '/x/y.sqlite' })).toEqual({
      type: 'better-sqlite3',
      database: '/x/y.sqlite',
    });
  });
});

describe('tempSqliteFile', () => {
  it('gives a not yet existing file in a fresh dir; cleanup() removes the dir (twice is fine)', async () => {
    const a = tempSqliteFile();
    const b = tempSqliteFile();
    expect(dirname(a.file)).not.toBe(dirname(b.file));
    expect(existsSync(a.file)).toBe(false);
    const ds = await open(optionsFor('sqlite', { sqliteFile: a.file }));
    await ds.query('CREATE TABLE t (k TEXT)');
    await ds.destroy();
    expect(existsSync(a.file)).toBe(true);
    a.cleanup();
    a.cleanup();
    b.cleanup();
    expect(existsSync(dirname(a.file))).toBe(false);
    expect(existsSync(dirname(b.file))).toBe(false);
  });
});

describe('uniqueTableName', () => {
  it('is unique and a plain identifier', () => {
    const names = new Set(Array.from({ length: 100 }, () => uniqueTableName()));
    expect(names.size).toBe(100);
    for (const name of names) expect(name).toMatch(/^lock_t_[0-9a-f]{8}$/);
    expect(uniqueTableName('fence')).toMatch(/^fence_[0-9a-f]{8}$/);
    expect(() => uniqueTableName('bad-prefix')).toThrow(/identifier/);
  });
});

describe('dropTable', () => {
  it.each(KINDS)('%s: drops the table; a missing table is no error', async (kind) => {
    const options = optionsFor(kind);
    const file = kind === 'sqlite' ? String(options.database) : undefined;
    const table = uniqueTableName();
    const ds = await open(options);
    await ds.query(`CREATE TABLE ${table} (k VARCHAR(100) PRIMARY KEY)`);
    expect(await tableExists(kind, ds, table)).toBe(true);
    await dropTable(kind, table, file);
    expect(await tableExists(kind, ds, table)).toBe(false);
    await dropTable(kind, table, file);
    await expect(dropTable(kind, 'x; DROP TABLE y', file)).rejects.toThrow(/identifier/);
  });

  it('sqlite: needs the file; a missing file is no error and is not created', async () => {
    await expect(dropTable('sqlite', 'lock_t_1')).rejects.toThrow(/file/);
    const temp = tempSqliteFile();
    cleanups.push(temp.cleanup);
    await dropTable('sqlite', 'lock_t_1', temp.file);
    expect(existsSync(temp.file)).toBe(false);
  });
});

describe('scratchTable', () => {
  it.each(KINDS)('%s: a unique table on the test database; drop() removes it', async (kind) => {
    const table = scratchTable(kind, 'scratch');
    expect(table.name).toMatch(/^scratch_[0-9a-f]{8}$/);
    expect(table.sqliteFile === undefined).toBe(kind !== 'sqlite');
    const options = table.dataSourceOptions({ poolSize: 2 });
    if (kind === 'sqlite')
      expect(options).toEqual({ type: 'better-sqlite3', database: table.sqliteFile });
    else expect(options).toMatchObject({ type: kind, database: 'locktest', poolSize: 2 });
    const ds = await open(options);
    await ds.query(`CREATE TABLE ${table.name} (k VARCHAR(100) PRIMARY KEY)`);
    expect(await tableExists(kind, ds, table.name)).toBe(true);
    await table.drop();
    expect(await tableExists(kind, ds, table.name)).toBe(false);
    if (kind === 'sqlite') expect(existsSync(dirname(String(table.sqliteFile)))).toBe(false);
  });
});

describe('killConnections', () => {
  it('postgres: kills exactly the connections with that application_name', async () => {
    const victimName = uniqueTableName('victim');
    const victim = await open(optionsFor('postgres', { applicationName: victimName }));
    const bystander = await open(optionsFor('postgres', { applicationName: `${victimName}_b` }));
    const held: QueryRunner = victim.createQueryRunner();
    const other: QueryRunner = bystander.createQueryRunner();
    try {
      const [{ name }] = (await held.query('SELECT current_setting($1) AS name', [
        'application_name',
      ])) as [{ name: string }];
      expect(name).toBe(victimName);
      await other.query('SELECT 1');

      expect(await killConnections('postgres', { applicationName: victimName })).toBe(1);

      // TypeORM's postgres query runner releases itself on the connection's 'error' event: the
      // next query fails with QueryRunnerAlreadyReleasedError, not a QueryFailedError.
      await expect(held.query('SELECT 1')).rejects.toThrow(/already released/);
      expect(held.isReleased).toBe(true);
      await expect(other.query('SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
      expect(await killConnections('postgres', { applicationName: victimName })).toBe(0);
    } finally {
      await held.release().catch(() => undefined);
      await other.release();
    }
    // the pool replaces the dead connection
    await expect(victim.query('SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
  });

  it('postgres: also by backend pid', async () => {
    const ds = await open(optionsFor('postgres', { applicationName: uniqueTableName('pid') }));
    const held = ds.createQueryRunner();
    try {
      const [{ pid }] = (await held.query('SELECT pg_backend_pid() AS pid')) as [{ pid: number }];
      expect(await killConnections('postgres', { ids: [pid] })).toBe(1);
      await expect(held.query('SELECT 1')).rejects.toThrow(/already released/);
    } finally {
      await held.release().catch(() => undefined);
    }
  });

  it('mariadb: kills exactly the connections with those ids', async () => {
    const ds = await open(optionsFor('mariadb', { poolSize: 4 }));
    const held = ds.createQueryRunner();
    const other = ds.createQueryRunner();
    try {
      const connectionId = async (runner: QueryRunner): Promise<number> => {
        const rows = (await runner.query('SELECT CONNECTION_ID() AS id')) as { id: string }[];
        return Number(rows[0]?.id); // BIGINT: a string with TypeORM's bigNumberStrings default
      };
      const victimId = await connectionId(held);
      const otherId = await connectionId(other);
      expect(victimId).not.toBe(otherId);

      expect(await killConnections('mariadb', { ids: [victimId] })).toBe(1);

      // mysql2 reports the closed connection as a QueryFailedError; the runner stays unreleased
      await expect(held.query('SELECT 1')).rejects.toThrow(/closed state/);
      expect(held.isReleased).toBe(false);
      await expect(other.query('SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
      expect(await killConnections('mariadb', { ids: [victimId] })).toBe(0);
    } finally {
      await held.release().catch(() => undefined);
      await other.release();
    }
  });

  it('refuses to kill without a filter, and application names on mariadb', async () => {
    await expect(killConnections('postgres', {})).rejects.toThrow(/applicationName or ids/);
    await expect(killConnections('mariadb', { applicationName: 'x' })).rejects.toThrow(/ids/);
    await expect(killConnections('mariadb', { ids: [] })).resolves.toBe(0);
    await expect(killConnections('postgres', { ids: [1.5] })).rejects.toThrow(/integers/);
  });
});

// What the SQL backends build on: TypeORM 1.x's affected-row counts per driver.
describe('TypeORM 1.x: affected rows of UPDATE/DELETE', () => {
  it.each(KINDS)('%s', async (kind) => {
    const options = optionsFor(kind);
    const ds = await open(options);
    const table = uniqueTableName();
    const runner = ds.createQueryRunner();
    try {
      await runner.query(`CREATE TABLE ${table} (k VARCHAR(20) PRIMARY KEY, v INT)`);
      await runner.query(`INSERT INTO ${table} (k, v) VALUES ('a', 1), ('b', 2), ('c', 3)`);

      // queryRunner.query(sql, params, true) -> QueryResult { records, raw, affected }
      const all = await runner.query(`UPDATE ${table} SET v = v + 1`, [], true);
      expect(all.affected).toBe(3);
      const none = await runner.query(
        `UPDATE ${table} SET v = 0 WHERE k = ${param(kind, 1)}`,
        ['zz'],
        true,
      );
      expect(none.affected).toBe(0);
      // a row matched but left unchanged counts on every driver (mysql2 sets CLIENT_FOUND_ROWS)
      const same = await runner.query(
        `UPDATE ${table} SET v = v WHERE k = ${param(kind, 1)}`,
        ['a'],
        true,
      );
      expect(same.affected).toBe(1);

      // Without the flag (and through dataSource.query) each driver returns something else:
      const plain: unknown = await ds.query(`DELETE FROM ${table} WHERE k = ${param(kind, 1)}`, [
        'a',
      ]);
      if (kind === 'postgres') expect(plain).toEqual([[], 1]); // [rows, rowCount]
      if (kind === 'mariadb') expect(plain).toMatchObject({ affectedRows: 1 }); // ResultSetHeader
      if (kind === 'sqlite') expect(plain).toBe(3); // lastInsertRowid, NOT a count

      // UPDATE ... RETURNING: postgres gives records and affected; sqlite records only;
      // MariaDB 10.11 has no UPDATE ... RETURNING (only INSERT/DELETE ... RETURNING).
      const returning = `UPDATE ${table} SET v = v + 1 WHERE k = ${param(kind, 1)} RETURNING v`;
      if (kind === 'mariadb') {
        await expect(runner.query(returning, ['b'], true)).rejects.toThrow(/syntax/);
      } else {
        const result = await runner.query(returning, ['b'], true);
        expect(result.records).toEqual([{ v: 4 }]);
        expect(result.affected).toBe(kind === 'postgres' ? 1 : undefined);
      }
    } finally {
      await runner.release();
      await dropTable(kind, table, kind === 'sqlite' ? String(options.database) : undefined);
    }
  });
});
