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
import { connectionAnswers, PinnedConnections } from './pinned-connections';
import type { SqlFamily } from './sql-dialect';
import type { LeaseStrategy, SessionStrategy, SqlLockStrategy } from './sql-lock-strategy';
import type { SqlDatabase, SqlSource } from './sql-source';

/** Longest single database-side wait on Postgres (lock_timeout) before checking for abort. */
const PG_WAIT_CHUNK_MS = 2_000;

/**
 * The `typeorm` backend, whatever its strategy: finds the DataSource (lazily), makes sure the
 * key's row exists for strategies that lock it, pins a connection per session lock (with its
 * fence, the proof the connection still holds, and loss reports when it dies), waits in the
 * database for strategies that can, and answers `isLocked`, `ping` and `close`. The strategy
 * ({@link SqlLockStrategy}) only takes, checks and releases.
 */
export class SqlLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities;
  /** Present only for a strategy that waits in the database (`waiting: 'queue'`). */
  readonly acquire?: (request: QueuedRequest) => Promise<LockGrant | null>;
  private readonly pins: PinnedConnections;

  constructor(
    private readonly source: SqlSource,
    private readonly strategy: SqlLockStrategy,
    backendName: string,
  ) {
    this.pins = new PinnedConnections(backendName);
    const waitsInDatabase = strategy.kind === 'session' && strategy.waitsInDatabase;
    this.capabilities = {
      leaseBased: strategy.kind === 'lease',
      fencing: true,
      waiting: waitsInDatabase ? 'queue' : 'poll',
    };
    if (waitsInDatabase) this.acquire = (request) => this.waitInDatabase(request);
  }

  async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    const fence = await this.take(await this.source.open(), request, 0);
    return fence === null ? null : { fence };
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const strategy = this.strategy;
    if (strategy.kind === 'lease')
      return strategy.renew(await this.source.open(), key, token, ttlMs);
    // The session lock lives as long as the pinned connection: still held if the strategy's
    // probe (by default: the connection answers) says so.
    return this.pins.stillHeld(key, token, ({ db, runner }) =>
      strategy.probe ? strategy.probe(db, runner, key) : connectionAnswers(runner),
    );
  }

  async release(key: string, token: string): Promise<boolean> {
    if (this.strategy.kind === 'lease') {
      return this.strategy.release(await this.source.open(), key, token);
    }
    const pinned = this.pins.get(key, token);
    if (!pinned) return false;
    try {
      return await this.strategy.release(pinned.db, pinned.runner, key);
    } catch {
      return false; // the connection was gone: so was the lock
    } finally {
      await this.pins.drop(pinned);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    return this.strategy.isLocked(await this.source.open(), key);
  }

  onLost(listener: LockLossListener): void {
    this.pins.onLost(listener);
  }

  async ping(): Promise<void> {
    await (await this.source.open()).exec('SELECT 1 AS up', []);
  }

  async close(): Promise<void> {
    await this.pins.closeAll();
    await this.source.close();
  }

  /**
   * Waits in the database, in chunks so that an abort is seen between them: Postgres waits up
   * to `PG_WAIT_CHUNK_MS` at a time; MariaDB waits in whole seconds, so below one second it
   * tries without waiting and sleeps briefly instead.
   */
  private async waitInDatabase(request: QueuedRequest): Promise<LockGrant | null> {
    const db = await this.source.open();
    const deadline = monotonicNow() + request.waitMs;
    for (;;) {
      const remaining = deadline - monotonicNow();
      if (remaining <= 0 || request.signal.aborted) return null;
      const chunk = waitChunk(db.dialect.family, remaining);
      const fence = await this.take(db, request, chunk);
      if (fence !== null) return { fence };
      if (chunk === 0) await sleep(Math.min(remaining, 25 + Math.random() * 25), request.signal);
    }
  }

  /** One attempt, waiting up to `waitMs` in the database if the strategy can. */
  private take(db: SqlDatabase, request: GrantRequest, waitMs: number): Promise<number | null> {
    const { key, token, ttlMs } = request;
    return this.strategy.kind === 'lease'
      ? this.takeLease(db, this.strategy, key, token, ttlMs)
      : this.takeSession(db, this.strategy, key, token, waitMs);
  }

  /** A lease: taken in the key's row, which is created the first time the key is seen. */
  private async takeLease(
    db: SqlDatabase,
    strategy: LeaseStrategy,
    key: string,
    token: string,
    ttlMs: number,
  ): Promise<number | null> {
    const fence = await strategy.take(db, key, token, ttlMs);
    if (fence !== null || !(await db.createRowIfMissing(key))) return fence;
    return strategy.take(db, key, token, ttlMs); // a key never seen: its row is new and free
  }

  /**
   * A session lock: taken on a pinned connection (waiting up to `waitMs` in the database), then
   * granted with a fence. A lock taken but not granted is released; an unused connection goes
   * back to the pool.
   */
  private async takeSession(
    db: SqlDatabase,
    strategy: SessionStrategy,
    key: string,
    token: string,
    waitMs: number,
  ): Promise<number | null> {
    if (strategy.locksKeyRow) await db.createRowIfMissing(key); // the row must exist to be locked
    const runner = await this.pins.pin(db);
    let taken = false;
    let fence: number | null = null;
    try {
      taken = await strategy.take(db, runner, key, waitMs);
      if (taken) fence = await this.pins.grant(db, key, token, runner);
      return fence;
    } finally {
      if (fence === null) {
        if (taken) await strategy.release(db, runner, key).catch(() => undefined);
        await this.pins.unpin(runner);
      }
    }
  }
}

/** How long one database-side wait may last, given `remainingMs` (`0`: try without waiting). */
function waitChunk(family: SqlFamily, remainingMs: number): number {
  if (family === 'postgres') return Math.min(remainingMs, PG_WAIT_CHUNK_MS);
  return remainingMs >= 1_000 ? 1_000 : 0;
}
