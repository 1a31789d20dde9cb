import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import { reservedTableName } from './sql-dialect';
import { checkServer } from './sql.factory';
import { isMariadbVersion, type SqlServer } from './sql-server';
import { mysqlWaitTimeout, pgMilliseconds } from './sql-sessions';

const server = (version: string): SqlServer => ({
  mariadb: isMariadbVersion(version),
  pgVersion: 0,
  database: 'app',
});

/**
 * Which server a DataSource reaches is told by the server, not by the declared TypeORM type:
 * the decision, on `SELECT VERSION()` strings real servers return. (That a MariaDB server
 * reached with `type: 'mysql'` runs for-update end to end: test/e2e/typeorm-schema.e2e-spec.ts;
 * no MySQL server runs here, so its refusal is shown on the decision alone.)
 */
describe('SQL server facts', () => {
  it('tells MariaDB from MySQL by its version string', () => {
    for (const v of [
      '10.11.19-MariaDB-0+deb12u1',
      '11.4.2-MariaDB-ubu2404',
      '5.5.5-10.6.16-MariaDB',
    ])
      expect(isMariadbVersion(v)).toBe(true);
    for (const v of ['8.0.36', '8.4.0-0ubuntu0.24.04.1', '5.7.44-log', '9.1.0-commercial'])
      expect(isMariadbVersion(v)).toBe(false);
  });

  it('for-update: a MySQL server is refused naming the option, MariaDB accepted whatever the declared type', () => {
    const field = 'backends.db.dataSourceOptions.type';
    let refused: unknown;
    try {
      checkServer(server('8.0.36'), 'mysql', 'for-update', field);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(LockConfigError);
    expect((refused as LockConfigError).field).toBe(field);
    expect((refused as Error).message).toMatch(/MySQL; use "table" or "advisory"/);
    expect(() =>
      checkServer(server('10.11.19-MariaDB'), 'mysql', 'for-update', field),
    ).not.toThrow();
    for (const strategy of ['table', 'advisory'] as const)
      expect(() => checkServer(server('8.0.36'), 'mysql', strategy, field)).not.toThrow();
  });

  it('SQLite keeps sqlite_* names (any case) for itself; other databases do not', () => {
    for (const name of ['sqlite_master', 'sqlite_sequence', 'SQLITE_stat1', 'Sqlite_x'])
      expect(reservedTableName('sqlite', name)).toMatch(/reserved/);
    for (const name of ['sqlitelocks', 'my_sqlite_locks', 'distributed_lock'])
      expect(reservedTableName('sqlite', name)).toBeUndefined();
    expect(reservedTableName('postgres', 'sqlite_master')).toBeUndefined();
  });

  it('session bounds: PostgreSQL takes milliseconds, MariaDB whole seconds rounded up (never shorter)', () => {
    expect(pgMilliseconds(1_500.2)).toBe('1501ms');
    expect(mysqlWaitTimeout(1_000)).toBe(1);
    expect(mysqlWaitTimeout(1_001)).toBe(2);
    expect(mysqlWaitTimeout(30_000)).toBe(30);
  });
});
