import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
} from '../../core/contract/lock-backend';
import { advisoryKey64, advisoryLockName, PinnedConnections } from './pinned-connections';
import type { SqlSource } from './sql-source';

/**
 * `strategy: 'advisory'`: Postgres `pg_try_advisory_lock` on a 64-bit hash of the key, or
 * MariaDB/MySQL `GET_LOCK` on a hashed name (<= 64 characters), taken and released on the same
 * dedicated connection (an unlock sent on another pooled connection would silently do
 * nothing). The lock lives with that connection; its death aborts the holder's `signal`.
 * Hashing means two different keys can collide (2^-64 per pair on Postgres, 2^-240 on MariaDB):
 * a collision makes them exclude each other, never lets two holders in. Session advisory
 * locks do not survive PgBouncer transaction pooling: connect directly or in session mode.
 */
export class AdvisoryLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: false,
    fencing: true,
    waiting: 'poll',
  };
  private readonly pins: PinnedConnections;
  private readonly postgres: boolean;

  constructor(
    private readonly source: SqlSource,
    backendName: string,
  ) {
    this.pins = new PinnedConnections(source, backendName);
    this.postgres = source.dialect.family === 'postgres';
  }

  async tryAcquire({ key, token }: GrantRequest): Promise<LockGrant | null> {
    const runner = await this.pins.pin();
    let held = false;
    try {
      const result = this.postgres
        ? await runner.query(
            'SELECT pg_try_advisory_lock($1::bigint) AS ok',
            [advisoryKey64(key)],
            true,
          )
        : await runner.query('SELECT GET_LOCK(?, 0) AS ok', [advisoryLockName(key)], true);
      if (!truthy(result.records[0]?.ok)) return null;
      try {
        const fence = await this.pins.grant(key, token, runner);
        if (fence === null) return null;
        held = true;
        return { fence };
      } catch (err) {
        await this.unlock(runner.query.bind(runner), key).catch(() => undefined);
        throw err;
      }
    } finally {
      if (!held) await this.pins.unpin(runner);
    }
  }

  extend(key: string, token: string): Promise<boolean> {
    // Postgres: the lock lives with the session, so a live connection means held. MariaDB can
    // say who holds the name, so ask.
    if (this.postgres) return this.pins.stillHeld(key, token);
    return this.pins.stillHeld(key, token, async (runner) => {
      const result = await runner.query(
        'SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS mine',
        [advisoryLockName(key)],
        true,
      );
      return truthy(result.records[0]?.mine);
    });
  }

  async release(key: string, token: string): Promise<boolean> {
    const pinned = this.pins.get(key, token);
    if (!pinned) return false;
    try {
      return await this.unlock(pinned.runner.query.bind(pinned.runner), key);
    } catch {
      return false;
    } finally {
      await this.pins.drop(pinned);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    if (this.postgres) {
      const id = BigInt.asUintN(64, BigInt(advisoryKey64(key)));
      const result = await this.source.exec(
        `SELECT 1 AS held FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = ? AND objid = ? AND objsubid = 1`,
        [Number(id >> 32n), Number(id & 0xffffffffn)],
      );
      return result.records.length > 0;
    }
    const result = await this.source.exec('SELECT IS_USED_LOCK(?) IS NOT NULL AS used', [
      advisoryLockName(key),
    ]);
    return truthy(result.records[0]?.used);
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

  private async unlock(
    query: (
      sql: string,
      params: unknown[],
      structured: true,
    ) => Promise<{ records: Array<Record<string, unknown>> }>,
    key: string,
  ): Promise<boolean> {
    const result = this.postgres
      ? await query('SELECT pg_advisory_unlock($1::bigint) AS ok', [advisoryKey64(key)], true)
      : await query('SELECT RELEASE_LOCK(?) AS ok', [advisoryLockName(key)], true);
    return truthy(result.records[0]?.ok);
  }
}

/** `true`/`1`/`'1'` from either driver. */
function truthy(value: unknown): boolean {
  return value === true || Number(value) === 1;
}
