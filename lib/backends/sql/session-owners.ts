import { isLabelled } from '../../core/shared/token';
import type { SqlDatabase } from './sql-database';
import type { SessionLock } from './sql-lock-strategy';
import { RESERVED_PREFIX } from './fence-layout';
import { storedKey } from './sql-dialect';

/*
 * Who holds a session lock (`for-update`, `advisory`), for the engine's recipes that read the
 * holder back (leadership). The database knows only which session holds a lock, so a labelled
 * grant (the engine labels only the tokens it reads back) also writes an owner row, in
 * autocommit on a pooled connection once the lock is held: its token, its fence, and its
 * session's id (PostgreSQL backend pid, MariaDB thread id) in `expires_at`, the column a lease
 * row keeps its expiry in. The holder deletes the row before it releases; a holder that dies
 * leaves it, and its session with it: a row counts only while its session is alive, and the
 * next labelled holder of the key writes over it. Every way a session lock ends other than a
 * release ends its session, so a row whose session lives belongs to the key's holder.
 */

/** Stored key prefix of the owner rows. */
const OWNER_PREFIX = `${RESERVED_PREFIX}owner:`;

/**
 * The stored key of `key`'s owner row: reserved (see fence-layout.ts), so the tidying of key
 * rows never takes it for a lease that ran out; 64 characters like every stored key.
 */
function ownerRowKey(key: string): string {
  return `${OWNER_PREFIX}${storedKey(key).slice(OWNER_PREFIX.length)}`;
}

/** Whether a grant of `token` with `shape` keeps an owner row: a labelled token of a mutex. */
export function keepsOwnerRow(token: string, shape: SessionLock): boolean {
  return shape.mode === 'exclusive' && shape.permits === 1 && isLabelled(token);
}

/** Writes (or writes over) `key`'s owner row for the holder on session `sessionId`. */
export async function recordOwner(
  db: SqlDatabase,
  key: string,
  token: string,
  fence: number,
  sessionId: number | undefined,
): Promise<void> {
  const upsert =
    db.dialect.family === 'postgres'
      ? 'ON CONFLICT (lock_key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence'
      : 'ON DUPLICATE KEY UPDATE owner = VALUES(owner), expires_at = VALUES(expires_at), fence = VALUES(fence)';
  await db.exec(
    `INSERT INTO ${db.table} (lock_key, key_text, owner, expires_at, fence) VALUES (?, ?, ?, ?, ?) ${upsert}`,
    [ownerRowKey(key), `${key} (holder)`, token, sessionId ?? null, fence],
  );
}

/** Deletes `key`'s owner row if it is `token`'s. */
export async function clearOwner(db: SqlDatabase, key: string, token: string): Promise<void> {
  await db.exec(`DELETE FROM ${db.table} WHERE lock_key = ? AND owner = ?`, [
    ownerRowKey(key),
    token,
  ]);
}

/** The token and fence of `key`'s owner row, if its session is alive. */
export async function readOwner(
  db: SqlDatabase,
  key: string,
): Promise<{ owner: string; fence: number } | undefined> {
  const alive =
    db.dialect.family === 'postgres'
      ? 'SELECT 1 FROM pg_stat_activity a WHERE a.pid = t.expires_at'
      : 'SELECT 1 FROM information_schema.PROCESSLIST p WHERE p.ID = t.expires_at';
  const result = await db.exec(
    `SELECT owner, fence FROM ${db.table} t WHERE lock_key = ? AND EXISTS (${alive})`,
    [ownerRowKey(key)],
  );
  const row = result.records[0];
  return typeof row?.owner === 'string'
    ? { owner: row.owner, fence: Number(row.fence) }
    : undefined;
}
