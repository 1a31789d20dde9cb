import type { MigrationInterface, QueryRunner } from 'typeorm';
import { LockConfigError } from '../errors/lock.errors';
import { familyOf, IDENTIFIER, reservedTableName, SqlDialect } from '../backends/sql/sql-dialect';

/**
 * A TypeORM migration class creating the lock table (`tableName`, default `distributed_lock`)
 * with the exact DDL the backend expects on Postgres, MySQL/MariaDB or SQLite:
 * `migrations: [createDistributedLockMigration()]`. A name the database keeps for itself
 * (SQLite's `sqlite_*`) is refused with `LockConfigError` when the migration runs.
 */
export function createDistributedLockMigration(
  tableName = 'distributed_lock',
): new () => MigrationInterface {
  if (!IDENTIFIER.test(tableName)) {
    throw new LockConfigError(
      'tableName',
      `invalid lock table name "${tableName}": a letter or "_", then letters, digits or "_" (max 63)`,
    );
  }
  return class CreateDistributedLockTable1763700000000 implements MigrationInterface {
    // TypeORM wants the name to end with a timestamp; the table name keeps names distinct.
    name = `CreateDistributedLockTable_${tableName}_1763700000000`;

    async up(queryRunner: QueryRunner): Promise<void> {
      const dialect = dialectOf(queryRunner);
      const reserved = reservedTableName(dialect.family, tableName);
      if (reserved) throw new LockConfigError('tableName', reserved);
      await queryRunner.query(dialect.createTable(dialect.quote(tableName)));
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      const dialect = dialectOf(queryRunner);
      await queryRunner.query(`DROP TABLE IF EXISTS ${dialect.quote(tableName)}`);
    }
  };
}

function dialectOf(queryRunner: QueryRunner): SqlDialect {
  const family = familyOf(queryRunner.connection.options.type);
  if (!family) {
    throw new LockConfigError(
      'dataSource',
      `the lock table migration does not support ${queryRunner.connection.options.type}`,
    );
  }
  return new SqlDialect(family);
}
