import { createHash } from 'node:crypto';
import type { SqlDataSource } from './typeorm-types';

/** The SQL families the backend speaks. */
export type SqlFamily = 'postgres' | 'mysql' | 'sqlite';

/** Maps a TypeORM driver type to its SQL family, or `undefined` if unsupported. */
export function familyOf(dataSource: SqlDataSource): SqlFamily | undefined {
  switch (dataSource.options.type) {
    case 'postgres':
      return 'postgres';
    case 'mysql':
    case 'mariadb':
      return 'mysql';
    case 'better-sqlite3':
    case 'sqlite':
      return 'sqlite';
    default:
      return undefined;
  }
}

/** Identifiers accepted for the table name (unquoted-safe, then quoted anyway). */
export const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Per-family SQL fragments. Everything else is written once with `?` placeholders and every
 * value travels as a parameter; the only spliced text is the validated, quoted table name.
 */
export class SqlDialect {
  constructor(readonly family: SqlFamily) {}

  /** Quotes a validated identifier. */
  quote(identifier: string): string {
    return this.family === 'mysql' ? `\`${identifier}\`` : `"${identifier}"`;
  }

  /** Rewrites `?` placeholders to `$1..$n` for Postgres. */
  sql(text: string): string {
    if (this.family !== 'postgres') return text;
    let n = 0;
    return text.replace(/\?/g, () => `$${++n}`);
  }

  /** The database server's current time in epoch milliseconds (never the app's clock). */
  get nowMs(): string {
    switch (this.family) {
      case 'postgres':
        return `(floor(extract(epoch from clock_timestamp()) * 1000))::bigint`;
      case 'mysql':
        // UTC, so no session time zone or daylight-saving change can make the clock jump.
        return `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;
      case 'sqlite':
        return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;
    }
  }

  /** `INSERT` that does nothing when the key row exists. */
  insertIgnore(table: string, columns: string[]): string {
    const cols = columns.join(', ');
    const values = columns.map(() => '?').join(', ');
    switch (this.family) {
      case 'postgres':
        return `INSERT INTO ${table} (${cols}) VALUES (${values}) ON CONFLICT DO NOTHING`;
      case 'mysql':
        return `INSERT IGNORE INTO ${table} (${cols}) VALUES (${values})`;
      case 'sqlite':
        return `INSERT OR IGNORE INTO ${table} (${cols}) VALUES (${values})`;
    }
  }

  /** DDL of the lock table (idempotent). */
  createTable(table: string): string {
    switch (this.family) {
      case 'postgres':
        return `CREATE TABLE IF NOT EXISTS ${table} (lock_key CHAR(64) PRIMARY KEY, key_text TEXT NOT NULL, owner VARCHAR(64) NULL, expires_at BIGINT NULL, fence BIGINT NOT NULL DEFAULT 0)`;
      case 'mysql':
        return `CREATE TABLE IF NOT EXISTS ${table} (lock_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, key_text MEDIUMTEXT NOT NULL, owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL, expires_at BIGINT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`;
      case 'sqlite':
        return `CREATE TABLE IF NOT EXISTS ${table} (lock_key TEXT NOT NULL PRIMARY KEY, key_text TEXT NOT NULL, owner TEXT NULL, expires_at INTEGER NULL, fence INTEGER NOT NULL DEFAULT 0)`;
    }
  }
}

/**
 * The stored key: SHA-256 hex of the key, so any content and any length (10 KB, quotes, `%`,
 * unicode) fits one fixed ASCII column with no collation surprises (case-insensitive or
 * space-padding collations would merge distinct keys). The original is kept in `key_text`.
 */
export function storedKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}
