import { Logger } from '@nestjs/common';
import { monotonicNow } from '../../core/shared/clock';
import { backoffDelay } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { DatabaseWaitSlots, defaultWaitingConnections } from './database-wait-slots';
import { bucketFence } from './fence-counter';
import { clearOwner, keepsOwnerRow, readOwner } from './session-owners';
import { KeyWaitLines, type LinePlace } from './key-wait-lines';
import {
  announceRelease,
  pgClientFactory,
  PgReleaseListener,
  releaseChannel,
} from './pg-release-listener';
import { connectionAnswers, PinnedConnections, poolSize } from './pinned-connections';
import type { SqlDatabase } from './sql-database';
import { storedKey, type SqlFamily } from './sql-dialect';
import { ReleaseNotices } from './release-notices';
import type {
  LeaseStrategy,
  SessionCapabilities,
  SessionLock,
  SessionStrategy,
  SqlLockStrategy,
} from './sql-lock-strategy';
import { endSession, sessionIdOf } from './sql-sessions';
import type { SqlSource } from './sql-source';
import type { SqlRunner } from './typeorm-types';
import { sleepUntilWoken } from '../../core/shared/wake-up';
import { LockConfigError } from '../../errors/lock.errors';

/** MariaDB waits in whole seconds: below one, a waiter polls (NOWAIT) this often, ms (plus jitter). */
const SUBSECOND_POLL_MS = 25;
/** Share of `sessionTimeout` a session lock's lease may be trusted for (the rest: clock rates, latency). */
const SESSION_VALIDITY_SHARE = 0.9;
/**
 * A `table` waiter woken by release notifications still looks again by itself when the lease it
 * waits for runs out (an expired lease is announced by no one), and at the latest after this
 * long, ms: what a notification lost on a half-open listening connection can cost.
 */
const NOTIFIED_FALLBACK_MAX_MS = 3_000;
/** Past the lease's end by the database clock, a `table` waiter retries this much later, ms (plus jitter). */
const EXPIRY_SLACK_MS = 5;
/** How long the first `table` waiter waits for the listening connection before trying anyway, ms. */
const LISTEN_START_MS = 2_000;

/** Options of a {@link SqlLockBackend} besides its source and strategy. */
export interface SqlLockBackendOptions {
  /**
   * `for-update`: most connections waiting in the database at once (validated by the factory);
   * absent: {@link defaultWaitingConnections} of the pool size.
   */
  readonly maxWaitingConnections?: number;
  /**
   * PostgreSQL `table`: whether waiters listen for release notifications (a `LISTEN` connection
   * per backend); `false`: they poll with back-off. Default `true`.
   */
  readonly releaseNotifications?: boolean;
  /**
   * The database family from the DataSource's declared type, without I/O, or `undefined` while
   * the DataSource cannot be found yet (a DI provider made later): a session strategy's
   * capabilities depend on it. Asked again until it answers (the module checks `@Locked`
   * declarations once every provider exists); else learned on first use. Until then the
   * backend declares only what every family of the strategy can do.
   */
  readonly family?: () => SqlFamily | undefined;
}

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
 *
 * Waiting (`for-update`, `table`) goes through one local FIFO line per key ({@link KeyWaitLines}):
 * only the head of a key's line waits in the store, the rest wait in process. A `for-update`
 * head waits in the database's lock queue on a pinned connection while one of the
 * `maxWaitingConnections` slots is free, else tries without waiting and sleeps until a slot or a
 * pin frees; so waiters pin one connection per key waited on, and never more than the cap. A
 * `table` head tries, then sleeps until the release is announced (PostgreSQL `LISTEN`/`NOTIFY`,
 * see {@link PgReleaseListener}, unless `releaseNotifications` is off), the lease it waits for
 * runs out, or a back-off passes.
 */
export class SqlLockBackend implements LockBackend {
  /**
   * Present when `capabilities.waiting` is `'queue'` (set again once the database family is
   * known): waits in the key's local line.
   */
  acquire?: (request: QueuedRequest) => Promise<LockGrant | null>;
  /** The line wait `acquire` is while the strategy waits in the store. */
  readonly #acquire?: (request: QueuedRequest) => Promise<LockGrant | null>;
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
  readonly #backendName: string;
  readonly #maxWaitingConnections?: number;
  readonly #releaseNotifications: boolean;
  readonly #lines = new KeyWaitLines();
  readonly #slots = new DatabaseWaitSlots();
  /** Keys a session try is under way for: a second try of the same key answers busy at once. */
  readonly #trying = new Set<string>();
  /** `table` waiters by key: woken by this process's releases and the listener's. */
  readonly #notices = new ReleaseNotices();
  /** PostgreSQL `table`: made on the first wait (`null`: this database cannot have one). */
  #listener?: PgReleaseListener | null;
  #closed = false;
  /** The database family, once known (a session strategy's capabilities depend on it). */
  #family?: SqlFamily;
  /** Tells the family without I/O once the DataSource can be found (see the option). */
  readonly #familyHint?: () => SqlFamily | undefined;

  constructor(
    source: SqlSource,
    strategy: SqlLockStrategy,
    backendName: string,
    /** How long the server keeps a session it no longer hears from, ms (session strategies). */
    sessionTimeoutMs: number,
    options: SqlLockBackendOptions = {},
  ) {
    this.#source = source;
    this.#strategy = strategy;
    this.#backendName = backendName;
    this.#maxWaitingConnections = options.maxWaitingConnections;
    this.#releaseNotifications = options.releaseNotifications ?? true;
    this.#pins = new PinnedConnections(backendName, sessionTimeoutMs / 3);
    this.#familyHint = options.family;
    this.#family = options.family?.();
    if (strategy.kind === 'session') {
      this.#acquire = (request) => this.waitInLine(request, this.headOfSession);
    }
    if (strategy.kind === 'lease') {
      this.#acquire = (request) => this.waitInLine(request, this.headOfLease);
      this.extendMany = async (requests) => strategy.renewMany(await source.open(), requests);
    }
    this.acquire = this.capabilities.waiting === 'poll' ? undefined : this.#acquire;
    if (strategy.kind === 'session') {
      const cap = Math.floor(sessionTimeoutMs * SESSION_VALIDITY_SHARE);
      this.leaseValidity = (ttlMs) => Math.min(ttlMs, cap);
    }
  }

  /**
   * What this backend grants. A session strategy's depend on the database family: until it is
   * known, only what the strategy can do on every family it runs on (fail closed).
   */
  get capabilities(): LockBackendCapabilities {
    const strategy = this.#strategy;
    if (strategy.kind === 'lease') {
      // What the strategy grants (the same on every database); the engine refuses the rest
      // before any I/O.
      return {
        leaseBased: true,
        fencing: true,
        waiting: 'queue',
        shared: strategy.sharing?.shared ?? false,
        permits: strategy.sharing?.permits ?? false,
      };
    }
    const can = this.sessionCapabilities(strategy);
    return {
      leaseBased: false,
      fencing: true,
      waiting: can.waitsInDatabase ? 'queue' : 'poll',
      shared: can.shared,
      permits: can.permits,
      ...(can.maxPermits === undefined ? {} : { maxPermits: can.maxPermits }),
    };
  }

  /**
   * One attempt. A session mutex (one pinned connection per attempt) answers busy without
   * asking the database when the key is busy here already: held by this process as a mutex, waited for in
   * its line (whose head goes first), or tried by another call right now. A shared or counted
   * request may join holders of this process, so the database decides (behind the line still).
   */
  async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    if (this.#strategy.kind === 'lease') return this.take(await this.open(), request, 0);
    const { key } = request;
    if (this.#lines.size(key) > 0) return null;
    if (!isMutex(request)) return this.take(await this.open(), request, 0);
    // Held here as a mutex: busy. Held here shared or counted: the database says why (a mutex
    // beside counted holders is refused, not kept polling in vain).
    if (this.#pins.holdsMutex(key) || this.#trying.has(key)) return null;
    this.#trying.add(key);
    try {
      return await this.take(await this.open(), request, 0);
    } finally {
      this.#trying.delete(key);
    }
  }

  async extend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const strategy = this.#strategy;
    if (strategy.kind === 'lease') return strategy.renew(await this.open(), key, token, ttlMs);
    // The session lock lives as long as the pinned connection: still held if the strategy's
    // probe (by default: the connection answers) says so.
    return this.#pins.stillHeld(key, token, ({ db, runner, hold }) =>
      strategy.probe ? strategy.probe(db, runner, hold) : connectionAnswers(runner),
    );
  }

  async release(key: string, token: string): Promise<boolean> {
    if (this.#strategy.kind === 'lease') {
      const db = await this.open();
      const released = await this.#strategy.release(db, key, token);
      // PostgreSQL: the release statement itself notified the listeners.
      if (released) await this.announce(db, key, db.dialect.family === 'postgres');
      return released;
    }
    const pinned = this.#pins.get(key, token);
    if (!pinned) return false;
    try {
      // The owner row goes while the lock is still held: it never names a holder that released.
      if (keepsOwnerRow(token, pinned.hold)) await clearOwner(pinned.db, key, token);
      return await this.#strategy.release(pinned.db, pinned.runner, pinned.hold);
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
    return this.#strategy.isLocked(await this.open(), key);
  }

  /**
   * The key's row (table: holder, lease left, fence, and the callers of this process waiting
   * for it), or for a session lock whether it is held now and, where waiters queue in the
   * database, how many: those in its lock queue plus those of this process waiting in line
   * behind them. A session lock's fence: the holder's when it is held here; when it is held
   * elsewhere, `null` (the store keeps no fence per key, only the counter of the key's bucket,
   * which other keys move too); when free, that counter (at least the key's last fence, below
   * its next).
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const db = await this.open();
    const strategy = this.#strategy;
    if (strategy.kind === 'lease') {
      return { ...(await strategy.inspect(db, key)), waiting: this.#lines.size(key) };
    }
    const [held, counter, inDatabase, holders, owner] = await Promise.all([
      strategy.isLocked(db, key),
      bucketFence(db, key),
      strategy.waiting?.(db, key),
      strategy.holders?.(db, key),
      readOwner(db, key),
    ]);
    const waiting =
      inDatabase === undefined ? undefined : inDatabase + this.#lines.waitingHere(key);
    const fence = held ? (this.#pins.fenceOf(key) ?? owner?.fence ?? null) : counter;
    return {
      held,
      fence,
      holders: held ? 1 : 0,
      ...(held && holders ? holders : {}),
      ...(waiting === undefined ? {} : { waiting }),
      ...(held && owner ? { owner: owner.owner } : {}),
    };
  }

  async forceRelease(key: string): Promise<boolean> {
    const db = await this.open();
    const freed = await this.#strategy.forceRelease(db, key);
    if (freed && this.#strategy.kind === 'lease') await this.announce(db, key);
    return freed;
  }

  onLost(listener: LockLossListener): void {
    this.#pins.onLost(listener);
  }

  async ping(): Promise<void> {
    await (await this.open()).exec('SELECT 1 AS up', []);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#lines.close();
    await this.#listener?.close();
    const strategy = this.#strategy;
    // Locks still pinned (a lockAtLeastFor cut short): released, so a DataSource of the app's
    // gets its connections back without an open transaction or our session settings.
    if (strategy.kind === 'session') {
      await this.#pins.closeAll(({ db, runner, hold }) => strategy.release(db, runner, hold));
    }
    await this.#source.close();
  }

  /**
   * Waits in the key's local line until this caller is its head (or gives up), then lets `head`
   * wait for the lock in the store; the next caller moves up when it is done, granted or not.
   */
  private async waitInLine(
    request: QueuedRequest,
    head: (request: QueuedRequest, place: LinePlace, deadline: number) => Promise<LockGrant | null>,
  ): Promise<LockGrant | null> {
    const deadline = monotonicNow() + request.waitMs;
    request.onQueued?.();
    const place = await this.#lines.join(request.key, request.waitMs, request.signal);
    if (!place) return null;
    try {
      const grant = await head(request, place, deadline);
      if (grant && request.signal.aborted) {
        await this.release(request.key, request.token); // aborted meanwhile: not handed out
        return null;
      }
      return grant;
    } finally {
      place.leave();
    }
  }

  /**
   * The head of a `for-update` line. While a waiting slot is free and the pool can spare a pin,
   * one wait in the database for the whole time left (an abort ends the waiting session, so
   * nothing needs to look for it between shorter waits; MariaDB waits in whole seconds, so
   * below one second it tries without waiting and sleeps briefly instead). Otherwise a try
   * without waiting (none when this process holds the key as a mutex: it is busy for sure, and the try
   * would cost a pin), then a sleep until a slot or a pin frees or the back-off passes.
   */
  private readonly headOfSession = async (
    request: QueuedRequest,
    place: LinePlace,
    deadline: number,
  ): Promise<LockGrant | null> => {
    const { key, signal } = request;
    const db = await this.open();
    const limit = this.#maxWaitingConnections ?? defaultWaitingConnections(poolSize(db.dataSource));
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - monotonicNow();
      if (remaining <= 0 || signal.aborted || this.#closed) return null;
      const wait = db.dialect.family === 'postgres' || remaining >= 1_000 ? remaining : 0;
      if (wait > 0 && this.#pins.canPin(db) && this.#slots.tryTake(limit)) {
        place.inDatabase = true;
        try {
          // take() pins before its first await: the pin checked for just now is this one.
          const grant = await this.take(db, request, wait, signal);
          if (grant) return grant;
        } finally {
          place.inDatabase = false;
          this.#slots.give();
        }
        continue;
      }
      // A mutex's try is skipped only where this process holds the key as a mutex: held shared
      // or counted here, the database refuses it (permits disagree), which is worth the pin.
      if (this.#pins.canPin(db) && !(isMutex(request) && this.#pins.holdsMutex(key))) {
        const grant = await this.take(db, request, 0);
        if (grant) return grant;
      }
      const pause = wait > 0 ? backoffDelay(attempt) : SUBSECOND_POLL_MS * (1 + Math.random());
      await sleepUntilWoken(Math.min(deadline - monotonicNow(), pause), signal, [
        this.#slots.freed.source,
        this.#pins.freed.source,
      ]);
    }
  };

  /**
   * The head of a `table` line: try; if busy, sleep until the key's release is heard (made by
   * this process, or announced by another through the PostgreSQL listener), or else, with the
   * listener up, until the lease runs out (read from the row) or at most
   * {@link NOTIFIED_FALLBACK_MAX_MS}; without a listener, until the engine's back-off passes.
   * Interest in the release is registered before each try, so one heard in between still wakes it.
   * After each failed try the strategy looks at the key (`contend`): a writer finding readers
   * there marks the key as awaited (new readers then wait behind it: writer preference), looks
   * again before its mark's lease runs out, and takes the mark away when it stops waiting, so
   * the readers waiting elsewhere are told.
   */
  private readonly headOfLease = async (
    request: QueuedRequest,
    _place: LinePlace,
    deadline: number,
  ): Promise<LockGrant | null> => {
    const { key, signal } = request;
    const strategy = this.#strategy as LeaseStrategy;
    const db = await this.open();
    const listener = this.releaseListener(db);
    if (listener && !listener.listening) {
      // The first wait: listen before the try, so the release that ends this wait is heard.
      const started = listener.start();
      await sleepUntilWoken(Math.min(deadline - monotonicNow(), LISTEN_START_MS), signal, [
        (wake) => {
          void started.then(wake);
          return () => undefined;
        },
      ]);
    }
    let marked = false;
    let granted = false;
    try {
      for (let attempt = 0; ; attempt++) {
        if (deadline - monotonicNow() <= 0 || signal.aborted || this.#closed) return null;
        const notice = this.#notices.expect(storedKey(key));
        try {
          const grant = await this.take(db, request, 0);
          granted = grant !== null;
          if (grant) return grant;
          const contention = await strategy.contend(db, request);
          marked ||= contention.marked;
          let pause = listener?.listening
            ? untilLeaseEnds(contention.remainingMs, attempt)
            : backoffDelay(attempt);
          if (marked) pause = Math.min(pause, request.ttlMs / 3);
          await sleepUntilWoken(Math.min(deadline - monotonicNow(), pause), signal, [
            notice.source,
          ]);
        } finally {
          notice.cancel();
        }
      }
    } finally {
      if (marked) await this.withdraw(db, request, granted);
    }
  };

  /**
   * Takes a waiting writer's mark off the key; when the writer gave up, tells the readers that
   * wait behind it (as a release would). A mark that cannot be taken off runs out by itself.
   */
  private async withdraw(db: SqlDatabase, request: QueuedRequest, granted: boolean): Promise<void> {
    const strategy = this.#strategy as LeaseStrategy;
    const withdrawn = await strategy.withdraw(db, request.key, request.token).catch(() => false);
    if (withdrawn && !granted) await this.announce(db, request.key);
  }

  /**
   * The release listener of a PostgreSQL `table` backend, made on first use; none when
   * `releaseNotifications` is off (PgBouncer in transaction mode, a cap on connections).
   */
  private releaseListener(db: SqlDatabase): PgReleaseListener | undefined {
    if (this.#listener === undefined && !this.#closed) {
      const newClient =
        db.dialect.family === 'postgres' && this.#releaseNotifications
          ? pgClientFactory(db.dataSource)
          : undefined;
      const logger = new Logger('LockService');
      this.#listener = newClient
        ? new PgReleaseListener(
            this.#notices,
            newClient,
            releaseChannel(db.tableName),
            (err) => db.describe(err),
            (message) => logger.warn(`backend "${this.#backendName}": ${message}`),
          )
        : null;
    }
    return this.#listener ?? undefined;
  }

  /**
   * `table`: tells this process's waiters that `key` was just freed, and on PostgreSQL those of
   * every process.
   */
  private async announce(db: SqlDatabase, key: string, notified = false): Promise<void> {
    this.#notices.fire(storedKey(key));
    if (db.dialect.family === 'postgres' && !notified) await announceRelease(db, key);
  }

  /** The database, ready for statements; its family learned on first use. */
  private async open(): Promise<SqlDatabase> {
    const db = await this.#source.open();
    if (this.#family === undefined) this.learnFamily(db.dialect.family);
    return db;
  }

  /** Records the database family once known, and waits as that family's strategy can. */
  private learnFamily(family: SqlFamily | undefined): void {
    if (family === undefined) return;
    this.#family = family;
    this.acquire = this.capabilities.waiting === 'poll' ? undefined : this.#acquire;
  }

  /**
   * What a session strategy can do here: on the database's family once known, else only what
   * it can do on every family it runs on.
   */
  private sessionCapabilities(strategy: SessionStrategy): SessionCapabilities {
    if (this.#family === undefined && this.#familyHint) this.learnFamily(this.#familyHint());
    if (this.#family) return strategy.supports(this.#family);
    const all = (['postgres', 'mysql'] as const).map((family) => strategy.supports(family));
    const limits = all.flatMap((c) => (c.maxPermits === undefined ? [] : [c.maxPermits]));
    return {
      shared: all.every((c) => c.shared),
      permits: all.every((c) => c.permits),
      maxPermits: limits.length > 0 ? Math.min(...limits) : undefined,
      waitsInDatabase: all.every((c) => c.waitsInDatabase),
    };
  }

  /** One attempt, waiting up to `waitMs` in the database if the strategy can. */
  private async take(
    db: SqlDatabase,
    request: GrantRequest,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<LockGrant | null> {
    if (this.#strategy.kind === 'lease') {
      // The lease counts from this try (the row's expiry is set after it is sent), not from the
      // request: a queued take may come long after it, later than the ttl.
      const sentAt = monotonicNow();
      const grant = await this.#strategy.take(db, request);
      return grant && { ...grant, grantedAt: sentAt };
    }
    const { key, token } = request;
    const lock = { key, mode: request.mode ?? 'exclusive', permits: request.permits ?? 1 };
    return this.takeSession(db, this.#strategy, lock, token, waitMs, signal);
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
    lock: SessionLock,
    token: string,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<LockGrant | null> {
    const { key } = lock;
    // Pinned first, before any await: a waiter that just saw the pool could spare a pin gets it.
    const runner = await this.#pins.pin(db);
    const watch = signal && waitMs > 0 ? new AbortWatch(db, runner, signal) : undefined;
    let slot: number | null = null;
    try {
      slot = await strategy.take(db, runner, lock, waitMs);
    } catch (err) {
      if (!watch?.ending) {
        watch?.stop();
        if (err instanceof LockConfigError) {
          // A refusal of the request (permits disagree): the strategy left the connection clean.
          await this.#pins.unpin(runner);
          throw err;
        }
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
    const hold = slot === null ? null : { ...lock, slot };
    let grant: LockGrant | null = null;
    try {
      if (hold && !signal?.aborted) grant = await this.#pins.grant(db, hold, token, runner);
    } finally {
      if (grant === null) {
        if (hold) await strategy.release(db, runner, hold).catch(() => discardConnection(runner));
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
 * How long a `table` waiter that hears releases may sleep: until the lease it waits for ends
 * (by the database's clock, read from the row; an expired lease is announced by no one), at
 * most {@link NOTIFIED_FALLBACK_MAX_MS}; a lease already gone means a quick retry.
 */
function untilLeaseEnds(remainingMs: number | undefined, attempt: number): number {
  if (remainingMs === undefined) return backoffDelay(attempt);
  const slack = EXPIRY_SLACK_MS * (1 + Math.random());
  return Math.min(NOTIFIED_FALLBACK_MAX_MS, remainingMs + slack);
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

/** A plain mutex request (exclusive, one permit): any holder of its key excludes it. */
function isMutex(request: GrantRequest): boolean {
  return (request.mode ?? 'exclusive') === 'exclusive' && (request.permits ?? 1) === 1;
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
