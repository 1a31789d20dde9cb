/*
 * What a database driver's error means to the lock, read from its code (PostgreSQL SQLSTATE,
 * mysql2 `code`) and errno (MariaDB/MySQL). TypeORM wraps driver errors in a QueryFailedError
 * that keeps the original as `driverError`, so both places are looked at.
 */

/** The SQLSTATE or driver code and the MariaDB/MySQL errno of a driver error, where it has them. */
export function driverErrorCodes(err: unknown): { code: unknown; errno: unknown } {
  const e = err as {
    code?: unknown;
    errno?: unknown;
    driverError?: { code?: unknown; errno?: unknown };
  } | null;
  return { code: e?.code ?? e?.driverError?.code, errno: e?.errno ?? e?.driverError?.errno };
}

/** The server rolled the transaction back to break a deadlock: Postgres 40P01, MariaDB 1213. */
export function isDeadlock(err: unknown): boolean {
  const { code, errno } = driverErrorCodes(err);
  return code === '40P01' || errno === 1213 || code === 'ER_LOCK_DEADLOCK';
}

/** "Row locked by someone else" errors: Postgres 55P03, MariaDB 1205, MySQL 3572 (NOWAIT). */
export function isLockBusy(err: unknown): boolean {
  const { code, errno } = driverErrorCodes(err);
  return (
    code === '55P03' ||
    errno === 1205 ||
    errno === 3572 ||
    code === 'ER_LOCK_WAIT_TIMEOUT' ||
    code === 'ER_LOCK_NOWAIT'
  );
}

/** Errors meaning another session created the table (or its type) first. */
export function isCreateRaceLost(err: unknown): boolean {
  const { code } = driverErrorCodes(err);
  return code === '23505' || code === '42P07' || code === '42710';
}
