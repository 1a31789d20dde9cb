import { monotonicNow } from '../../core/shared/clock';
import { sleep } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { bucketFence } from './fence-counter';
import { connectionAnswers, PinnedConnections } from './pinned-connections';
import type { SqlDatabase } from './sql-database';
import type { SessionStrategy, SqlLockStrategy } from './sql-lock-strategy';
import { endSession, sessionIdOf } from './sql-sessions';
import type { SqlSource } from './sql-source';
import type { SqlRunner } from './typeorm-types';

/** MariaDB waits in whole seconds: below one, a waiter polls (NOWAIT) this often, ms (plus jitter). */
const SUBSECOND_POLL_MS = 25;
/** Share of `sessionTimeout` a session lock's lease may be trusted for (the rest: clock rates, latency). */
const SESSION_VALIDITY_SHARE = 0.9;

/**
 * The `typeorm` backend, whatever its strategy: finds the DataSource (lazily), makes sure the
 * key's row exists for strategies that lock it, pins a connection per session lock (with its
 * fence, the proof the connection still holds, and loss reports when it dies), waits in the
 * database for strategies that can (ending the waiting session at once when the caller aborts),
 * and answers `isLocked`, `inspect`, `forceRelease`, `ping` and `close`. The strategy
 * ({@link SqlLockStrategy}) only takes, checks and releases.
 *
 * A session lock's lease is trusted for at most 90 % of `sessionTimeout`: the server ends a
 * session it has not heard from for that long, so a holder that cannot reach it stops believing
 * in its lock before the server hands it to someone else, and the engine's renewal (every third
 * of the lease) keeps a live holder's session well inside it.
 */
export class SqlLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities;
  /** Present only for a strategy that waits in the database (`waiting: 'queue'`). */
  readonly acquire?: (request: QueuedRequest) => Promise<LockGrant | null>;
  /** Present only for session strategies: capped below the server's session timeout. */
  readonly leaseValidity?: (ttlMs: number) => number;
  /**
   * Present only for `table`: a few statements renew every lease due. A session lock's
   * renewal is a probe of its own pinned connection, one round trip per lock whatever is
   * batched, so the engine's per-lease `extend` is all there is for those.
   */
  readonly extendMany?: (requests: readonly GrantRequest[]) => Promise<Array<boolean | Error>>;
  // ES private (#) fields: `util.inspect` of anything that reaches the backend (a lock handle
  // dumped at full depth) never walks into the DataSource and its options.
  readonly #pins: PinnedConnections;
  readonly #source: SqlSource;
  readonly #strategy: SqlLockStrategy;

  constructor(
    source: SqlSource,
    strategy: SqlLockStrategy,
    backendName: string,
    /** How long the server keeps a session it no longer hears from, ms (session strategies). */
    sessionTimeoutMs: number,
  ) {
    this.#source = source;
    this.#strategy = strategy;
    this.#pins = new PinnedConnections(backendName, sessionTimeoutMs / 3);
    const waitsInDatabase = strategy.kind === 'session' && strategy.waitsInDatabase;
    this.capabilities = {
      leaseBased: strategy.kind === 'lease',
      fencing: true,
      waiting: waitsInDatabase ? 'queue' : 'poll',
    };
    if (waitsInDatabase) this.acquire = (request) => this.waitInDatabase(request);
    if (strategy.kind === 'lease') {
      this.extendMany = async (requests) => strategy.renewMany(await source.open(), requests);
    }
    if (strategy.kind === 'session') {
      const cap = Math.floor(sessionTimeoutMs * SESSION_VALIDITY_SHARE);
      this.leaseValidity = (ttlMs) => Math.min(ttlMs, cap);
    }
  }

  async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    return this.take(await this.#source.open(), request, 0);
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const strategy = this.#strategy;
    if (strategy.kind === 'lease')
      return strategy.renew(await this.#source.open(), key, token, ttlMs);
    // The session lock lives as long as the pinned connection: still held if the strategy's
    // probe (by default: the connection answers) says so.
    return this.#pins.stillHeld(key, token, ({ db, runner }) =>
      strategy.probe ? strategy.probe(db, runner, key) : connectionAnswers(runner),
    );
  }

  async release(key: string, token: string): Promise<boolean> {
    if (this.#strategy.kind === 'lease') {
      return this.#strategy.release(await this.#source.open(), key, token);
    }
    const pinned = this.#pins.get(key, token);
    if (!pinned) return false;
    try {
      return await this.#strategy.release(pinned.db, pinned.runner, key);
    } catch {
      // The connection is gone, and the lock with it; or it failed half-way and its session
      // may still hold the row (and an open transaction): never hand that to the pool.
      discardConnection(pinned.runner);
      return false;
    } finally {
      await this.#pins.drop(pinned);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    return this.#strategy.isLocked(await this.#source.open(), key);
  }

  /**
   * The key's row (table: holder, lease left, fence), or for a session lock whether it is held
   * now and, where waiters queue in the database, how many. A session lock's fence: the
   * holder's when it is held here; when it is held elsewhere, `null` (the store keeps no fence
   * per key, only the counter of the key's bucket, which other keys move too); when free, that
   * counter (at least the key's last fence, below its next).
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const db = await this.#source.open();
    const strategy = this.#strategy;
    if (strategy.kind === 'lease') return strategy.inspect(db, key);
    const [held, counter, waiting] = await Promise.all([
      strategy.isLocked(db, key),
      bucketFence(db, key),
      strategy.waiting?.(db, key),
    ]);
    const fence = held ? (this.#pins.fenceOf(key) ?? null) : counter;
    return { held, fence, holders: held ? 1 : 0, ...(waiting === undefined ? {} : { waiting }) };
  }

  async forceRelease(key: string): Promise<boolean> {
    return this.#strategy.forceRelease(await this.#source.open(), key);
  }

  onLost(listener: LockLossListener): void {
    this.#pins.onLost(listener);
  }

  async ping(): Promise<void> {
    await (await this.#source.open()).exec('SELECT 1 AS up', []);
  }

  async close(): Promise<void> {
    const strategy = this.#strategy;
    // Locks still pinned (a lockAtLeastFor cut short): released, so a DataSource of the app's
    // gets its connections back without an open transaction or our session settings.
    if (strategy.kind === 'session') {
      await this.#pins.closeAll(({ db, runner, key }) => strategy.release(db, runner, key));
    }
    await this.#source.close();
  }

  /**
   * Waits in the database: one wait for the whole time left (an abort ends the waiting session,
   * so nothing needs to look for it between shorter waits). MariaDB waits in whole seconds, so
   * below one second it tries without waiting and sleeps briefly instead.
   */
  private async waitInDatabase(request: QueuedRequest): Promise<LockGrant | null> {
    const { signal } = request;
    const db = await this.#source.open();
    const deadline = monotonicNow() + request.waitMs;
    for (;;) {
      const remaining = deadline - monotonicNow();
      if (remaining <= 0 || signal.aborted) return null;
      const wait = db.dialect.family === 'postgres' || remaining >= 1_000 ? remaining : 0;
      const grant = await this.take(db, request, wait, signal);
      if (grant) return grant;
      if (wait === 0) {
        await sleep(Math.min(remaining, SUBSECOND_POLL_MS * (1 + Math.random())), signal);
      }
    }
  }

  /** One attempt, waiting up to `waitMs` in the database if the strategy can. */
  private async take(
    db: SqlDatabase,
    request: GrantRequest,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<LockGrant | null> {
    const { key, token, ttlMs } = request;
    if (this.#strategy.kind === 'session') {
      return this.takeSession(db, this.#strategy, key, token, waitMs, signal);
    }
    const fence = await this.#strategy.take(db, key, token, ttlMs);
    return fence === null ? null : { fence };
  }

  /**
   * A session lock: taken on a pinned connection (waiting up to `waitMs` in the database), then
   * granted with a fence, its lease counted from the round trip that proved the connection still
   * holds (a wait in the database may have lasted longer than the lease). A lock taken but not
   * granted is released; an unused connection goes back to the pool. When `signal` aborts during the wait, the waiting session is ended from
   * another connection: the wait stops at once, and whatever the server may have granted it
   * meanwhile goes with it. The attempt then resolves `null`.
   */
  private async takeSession(
    db: SqlDatabase,
    strategy: SessionStrategy,
    key: string,
    token: string,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<LockGrant | null> {
    if (strategy.locksKeyRow) await db.createRowIfMissing(key); // the row must exist to be locked
    const runner = await this.#pins.pin(db);
    const watch = signal && waitMs > 0 ? new AbortWatch(db, runner, signal) : undefined;
    let taken = false;
    try {
      taken = await strategy.take(db, runner, key, waitMs);
    } catch (err) {
      if (!watch?.ending) {
        watch?.stop();
        // A take that failed may have left its session in a transaction, or holding the row.
        discardConnection(runner);
        await this.#pins.unpin(runner);
        throw err;
      }
    }
    watch?.stop();
    if (watch?.ending) {
      // The session is (being) ended: nothing of it may go back to the pool.
      await watch.ending;
      discardConnection(runner);
      await this.#pins.unpin(runner);
      return null;
    }
    let grant: LockGrant | null = null;
    try {
      if (taken && !signal?.aborted) grant = await this.#pins.grant(db, key, token, runner);
    } finally {
      if (grant === null) {
        if (taken) await strategy.release(db, runner, key).catch(() => discardConnection(runner));
        await this.#pins.unpin(runner);
      }
    }
    if (grant !== null && signal?.aborted) {
      await this.release(key, token); // aborted while the fence was drawn: not handed out
      return null;
    }
    return grant;
  }
}

/**
 * Ends the session of a connection waiting in the database (from a pooled connection) as soon
 * as the caller's signal aborts: the wait stops at once, and whatever the server may have
 * granted it meanwhile goes with the session.
 */
class AbortWatch {
  /** Set once the session is being ended: resolves when the server has done it. */
  ending?: Promise<void>;
  private readonly onAbort = (): void => {
    const id = sessionIdOf(this.runner);
    this.ending ??=
      id === undefined
        ? Promise.resolve()
        : endSession(this.db, id).then(
            () => undefined,
            () => undefined,
          );
  };

  constructor(
    private readonly db: SqlDatabase,
    private readonly runner: SqlRunner,
    private readonly signal: AbortSignal,
  ) {
    if (signal.aborted) this.onAbort();
    else signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Stops listening (the attempt is over). */
  stop(): void {
    this.signal.removeEventListener('abort', this.onAbort);
  }
}

/**
 * Closes the driver connection of `runner` on our side too, so the pool drops it instead of
 * handing a connection whose session the server is ending to the next caller.
 */
function discardConnection(runner: SqlRunner): void {
  const connection = runner.databaseConnection as { destroy?(): void; end?(): unknown } | undefined;
  if (typeof connection?.destroy === 'function') connection.destroy();
  else if (typeof connection?.end === 'function') {
    void Promise.resolve(connection.end()).catch(() => undefined);
  }
}
