import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
  QueuedRequest,
} from '../../core/contract/lock-backend';
import { PinnedConnections } from './pinned-connections';
import { storedKey } from './sql-dialect';
import type { SqlSource } from './sql-source';
import type { SqlRunner } from './typeorm-types';

/** Longest single database-side wait (Postgres lock_timeout) before checking for abort. */
const PG_WAIT_CHUNK_MS = 2_000;

/**
 * `strategy: 'for-update'` (Postgres, MySQL/MariaDB): a dedicated connection holds an open
 * transaction with `SELECT ... FOR UPDATE` on the key's row. Try = `NOWAIT`; wait = the
 * database's own lock wait (Postgres `lock_timeout`, MariaDB `WAIT n`), so waiters queue in the
 * database. Release = commit. If the connection dies, the database releases the lock and the
 * holder's `signal` aborts. The fence comes from a counter row bumped outside the transaction.
 */
export class ForUpdateLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: false,
    fencing: true,
    waiting: 'queue',
  };
  private readonly pins: PinnedConnections;

  constructor(
    private readonly source: SqlSource,
    backendName: string,
  ) {
    this.pins = new PinnedConnections(source, backendName);
  }

  tryAcquire({ key, token }: GrantRequest): Promise<LockGrant | null> {
    return this.lock(key, token, 0);
  }

  async acquire({ key, token, waitMs, signal }: QueuedRequest): Promise<LockGrant | null> {
    const deadline = monotonicNow() + waitMs;
    const postgres = this.source.dialect.family === 'postgres';
    for (;;) {
      const remaining = deadline - monotonicNow();
      if (remaining <= 0 || signal.aborted) return null;
      // MariaDB waits in whole seconds: below one second, poll with NOWAIT instead.
      const chunk = postgres
        ? Math.min(remaining, PG_WAIT_CHUNK_MS)
        : remaining >= 1_000
          ? 1_000
          : 0;
      const grant = await this.lock(key, token, chunk);
      if (grant) return grant;
      if (chunk === 0) await sleep(Math.min(remaining, 25 + Math.random() * 25), signal);
    }
  }

  extend(key: string, token: string): Promise<boolean> {
    // The transaction, and so the row lock, lives as long as the pinned connection.
    return this.pins.stillHeld(key, token);
  }

  async release(key: string, token: string): Promise<boolean> {
    const pinned = this.pins.get(key, token);
    if (!pinned) return false;
    try {
      await pinned.runner.commitTransaction();
      return true;
    } catch {
      return false; // the connection was gone: so was the lock
    } finally {
      await this.pins.drop(pinned);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    // A shared row lock that skips locked rows, in one autocommit statement: no row back (for
    // an existing row) means someone holds it FOR UPDATE. Shared locks do not conflict with
    // each other, so concurrent isLocked calls cannot see one another as holders.
    const { table, dialect } = this.source;
    const mode =
      dialect.family === 'postgres'
        ? 'FOR KEY SHARE SKIP LOCKED'
        : 'LOCK IN SHARE MODE SKIP LOCKED';
    const k = storedKey(key);
    const free = await this.source.exec(
      `SELECT lock_key FROM ${table} WHERE lock_key = ? ${mode}`,
      [k],
    );
    if (free.records.length > 0) return false;
    const exists = await this.source.exec(`SELECT 1 AS present FROM ${table} WHERE lock_key = ?`, [
      k,
    ]);
    return exists.records.length > 0;
  }

  onLost(listener: LockLossListener): void {
    this.pins.onLost(listener);
  }

  ping(): Promise<void> {
    return this.source.ping();
  }

  async close(): Promise<void> {
    await this.pins.closeAll();
    await this.source.close();
  }

  private async lock(key: string, token: string, waitMs: number): Promise<LockGrant | null> {
    const { dialect, table } = this.source;
    const k = storedKey(key);
    // The row must exist to be locked. Look first with a plain (non-locking) read: on InnoDB an
    // INSERT IGNORE of an existing row waits for whoever holds it FOR UPDATE.
    const exists = await this.source.exec(`SELECT 1 AS present FROM ${table} WHERE lock_key = ?`, [
      k,
    ]);
    if (exists.records.length === 0) {
      await this.source.exec(dialect.insertIgnore(table, ['lock_key', 'key_text', 'fence']), [
        k,
        key,
        0,
      ]);
    }
    const runner = await this.pins.pin();
    let held = false;
    try {
      await runner.startTransaction();
      if (this.source.dialect.family === 'postgres') {
        // The lock lives in this transaction: a server-side idle-in-transaction timeout below
        // our lease would end it (and free the row) while we still believe we hold it.
        await runner.query(
          `SELECT set_config('idle_in_transaction_session_timeout', '0', true)`,
          [],
          true,
        );
      }
      if (!(await this.lockRow(runner, k, waitMs))) return null;
      const fence = await this.pins.grant(key, token, runner);
      if (fence === null) return null;
      held = true;
      return { fence };
    } finally {
      if (!held) {
        await runner.rollbackTransaction().catch(() => undefined);
        await this.pins.unpin(runner);
      }
    }
  }

  /** Locks the key's row in the open transaction: `true` when locked, `false` when busy. */
  private async lockRow(runner: SqlRunner, k: string, waitMs: number): Promise<boolean> {
    const postgres = this.source.dialect.family === 'postgres';
    let mode = 'NOWAIT';
    if (waitMs > 0 && postgres) {
      // Transaction-local: the pooled connection goes back with its default lock_timeout.
      await runner.query(
        `SELECT set_config('lock_timeout', $1, true)`,
        [`${Math.ceil(waitMs)}ms`],
        true,
      );
      mode = '';
    } else if (waitMs > 0) {
      mode = `WAIT ${Math.max(1, Math.floor(waitMs / 1_000))}`; // a computed integer, not input
    }
    try {
      await runner.query(this.selectForUpdate(mode), [k], true);
      return true;
    } catch (err) {
      if (isLockBusy(err)) return false;
      throw this.source.explain(err);
    }
  }

  private selectForUpdate(mode: string): string {
    return this.source.dialect.sql(
      `SELECT lock_key FROM ${this.source.table} WHERE lock_key = ? FOR UPDATE ${mode}`.trim(),
    );
  }
}

/** "Row locked by someone else" errors: Postgres 55P03, MariaDB 1205, MySQL 3572 (NOWAIT). */
export function isLockBusy(err: unknown): boolean {
  const e = err as {
    code?: unknown;
    errno?: unknown;
    driverError?: { code?: unknown; errno?: unknown };
  } | null;
  const code = e?.code ?? e?.driverError?.code;
  const errno = e?.errno ?? e?.driverError?.errno;
  return (
    code === '55P03' ||
    errno === 1205 ||
    errno === 3572 ||
    code === 'ER_LOCK_WAIT_TIMEOUT' ||
    code === 'ER_LOCK_NOWAIT'
  );
}
