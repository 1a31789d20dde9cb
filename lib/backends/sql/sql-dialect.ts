import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * This boot's id on Linux (`/proc/sys/kernel/random/boot_id`), or `undefined` elsewhere. With
 * it, SQLite leases run on CLOCK_MONOTONIC, which every process of the machine shares and which
 * never jumps; rows written in an earlier boot (whose monotonic clock started over) are told
 * apart by the boot id stored with the owner.
 */
const BOOT_ID: string | undefined = (() => {
  try {
    const id = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return /^[0-9a-f-]{36}$/.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
})();

/** The SQL families the backend speaks. */
export type SqlFamily = 'postgres' | 'mysql' | 'sqlite';

/** Maps a TypeORM driver type (`DataSource.options.type`) to its SQL family, or `undefined`. */
export function familyOf(type: string): SqlFamily | undefined {
  switch (type) {
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
 * Why `tableName` cannot be the lock table on `family`, or `undefined` when it can: SQLite keeps
 * every name beginning with `sqlite_` (in any case) for its own tables (`sqlite_master`,
 * `sqlite_sequence`, `sqlite_stat1`...), and refuses to create one.
 */
export function reservedTableName(family: SqlFamily, tableName: string): string | undefined {
  if (family === 'sqlite' && /^sqlite_/i.test(tableName)) {
    return `"${tableName}" is reserved: SQLite keeps names beginning with "sqlite_" for its own tables`;
  }
  return undefined;
}

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

  /**
   * The lease clock in milliseconds, as SQL: the database server's clock (never the app's), or
   * for SQLite, which has no server, the machine's monotonic clock (a literal; see BOOT_ID) —
   * a wall clock stepped by NTP or an operator would otherwise expire every held lock at once.
   */
  get nowMs(): string {
    switch (this.family) {
      case 'postgres':
        return `(floor(extract(epoch from clock_timestamp()) * 1000))::bigint`;
      case 'mysql':
        // UTC, so no session time zone or daylight-saving change can make the clock jump.
        return `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;
      case 'sqlite':
        return BOOT_ID === undefined
          ? `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
          : String(process.hrtime.bigint() / 1_000_000n);
    }
  }

  /** The value stored in `owner` for `token`: on the monotonic SQLite clock, tagged with the boot. */
  owner(token: string): string {
    return this.family === 'sqlite' && BOOT_ID !== undefined ? `${BOOT_ID}/${token}` : token;
  }

  /**
   * SQL condition true for a row owned in an earlier boot (its expiry is on another monotonic
   * clock, and its holder is dead anyway); `FALSE` where the clock does not restart.
   */
  get ownedInOtherBoot(): string {
    return this.family === 'sqlite' && BOOT_ID !== undefined
      ? `owner NOT LIKE '${BOOT_ID}/%'`
      : '1 = 0';
  }

  /**
   * SQL condition: a lease row (columns prefixed with `alias`) is free to take: no holder, its
   * lease ran out (judged by the lease clock), or it was taken in an earlier boot (SQLite).
   */
  freeLease(alias = ''): string {
    return `${alias}owner IS NULL OR ${alias}expires_at IS NULL OR ${alias}expires_at <= ${this.nowMs} OR ${this.ownedInOtherBoot}`;
  }

  /** SQL condition: a lease row is held by a lease that has not run out. */
  get heldLease(): string {
    return `owner IS NOT NULL AND expires_at > ${this.nowMs} AND NOT (${this.ownedInOtherBoot})`;
  }

  /** The larger of two SQL expressions. */
  greatest(a: string, b: string): string {
    return this.family === 'sqlite' ? `max(${a}, ${b})` : `GREATEST(${a}, ${b})`;
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
        return `CREATE TABLE IF NOT EXISTS ${table} (lock_key CHAR(64) PRIMARY KEY, key_text TEXT NOT NULL, owner VARCHAR(1024) NULL, expires_at BIGINT NULL, fence BIGINT NOT NULL DEFAULT 0)`;
      case 'mysql':
        return `CREATE TABLE IF NOT EXISTS ${table} (lock_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, key_text MEDIUMTEXT NOT NULL, owner VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin NULL, expires_at BIGINT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`;
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
