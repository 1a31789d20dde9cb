import type { LockGrant, LockLossListener } from '../../core/contract/lock-backend';
import { monotonicNow } from '../../core/shared/clock';
import { LockBackendError } from '../../errors/lock.errors';
import { nextFence } from './fence-counter';
import { clearOwner, keepsOwnerRow, recordOwner } from './session-owners';
import { sessionIdOf } from './sql-sessions';
import type { SqlDatabase } from './sql-database';
import type { SessionHold } from './sql-lock-strategy';
import type { SqlDataSource, SqlRunner } from './typeorm-types';
import { Pulse } from '../../core/shared/wake-up';

/** One held lock and the connection it lives on. */
export interface Pinned {
  readonly key: string;
  readonly token: string;
  /** What is held: mode, permits and slot (the strategy releases and probes by it). */
  readonly hold: SessionHold;
  readonly runner: SqlRunner;
  /** The database `runner` belongs to. */
  readonly db: SqlDatabase;
  /** The grant's fence (the store keeps none per key: `inspect` reads it here). */
  readonly fence: number;
  /** Monotonic time of the last statement known to have reached the server on `runner`. */
  lastHeard: number;
  /** A keep-alive statement is under way on `runner`. */
  keepingAlive: boolean;
  /** Stops watching the connection. */
  unwatch(): void;
}

/** Connections the pool keeps for ordinary queries (fence counter, key rows). */
const RESERVED_CONNECTIONS = 1;
const DEFAULT_POOL_SIZE = 10;

/**
 * Bookkeeping for session-bound SQL locks (`for-update`, `advisory`): each held lock pins one
 * pooled connection, for the lock lives and dies with it. Watches that connection so its death
 * (server-side kill, network) is reported at once, caps pins below the pool size with a clear
 * error instead of a hang, and hands out fences from the key's bucket (fence-counter.ts).
 *
 * It also keeps every held lock's session alive on the server: the strategies have the server
 * end a session it has not heard from for `sessionTimeout`, and a lock the engine no longer
 * renews is not necessarily free to go (`lockAtLeastFor` keeps a released lock a while). So a
 * connection silent for a third of it gets one cheap statement, like a ZooKeeper client's
 * heartbeat: a live process keeps its sessions, a frozen or cut-off one loses them.
 */
export class PinnedConnections {
  private readonly held = new Map<string, Pinned>();
  /** Held locks per key (a key is busy here while it has one). */
  private readonly heldKeys = new Map<string, number>();
  /** Pins in use, including acquisitions in progress. */
  private pinned = 0;
  /** Fires each time a connection goes back to the pool (a waiter short of one may go on). */
  readonly freed = new Pulse();
  private lostListener: LockLossListener = () => undefined;
  private keepAliveTimer?: NodeJS.Timeout;

  constructor(
    private readonly backendName: string,
    /** How often a silent held connection gets a keep-alive statement, ms. */
    private readonly keepAliveMs: number,
  ) {}

  /** Registers the loss listener (the core's). */
  onLost(listener: LockLossListener): void {
    this.lostListener = listener;
  }

  /** Whether one more connection can be pinned now without exhausting the pool. */
  canPin(db: SqlDatabase): boolean {
    return this.pinned < maxPins(db.dataSource);
  }

  /** Whether this process holds `key` as a mutex (exclusive, one permit): busy for every other. */
  holdsMutex(key: string): boolean {
    if (!this.heldKeys.has(key)) return false;
    for (const { key: held, hold } of this.held.values()) {
      if (held === key && hold.mode === 'exclusive' && hold.permits === 1) return true;
    }
    return false;
  }

  /**
   * A dedicated connection, or `LockBackendError` when that would exhaust the pool. Counted
   * before its first await, so a caller that checked {@link canPin} just before gets it.
   */
  async pin(db: SqlDatabase): Promise<SqlRunner> {
    const ds = db.dataSource;
    const max = maxPins(ds);
    if (this.pinned >= max) {
      throw new LockBackendError(
        this.backendName,
        `cannot hold more than ${max} locks at once on this DataSource (pool size ${poolSize(ds)}; each held lock pins a connection): raise the pool size or release locks`,
      );
    }
    this.pinned++;
    const runner = db.connection();
    try {
      await runner.connect();
      return runner;
    } catch (err) {
      this.pinned--;
      await runner.release().catch(() => undefined);
      throw err;
    }
  }

  /** Gives a connection back to the pool (after the lock on it is released). */
  async unpin(runner: SqlRunner): Promise<void> {
    this.pinned--;
    await runner.release().catch(() => undefined);
    this.freed.fire();
  }

  /**
   * Completes a grant once `runner` holds the database lock: draws the fence (on another
   * connection), then proves with one round trip that `runner` still holds, and records the
   * held lock. `null` when the connection died meanwhile: a server restart between the lock
   * and the draw has already handed the lock to someone else, with a later fence, so this grant
   * must not be handed out; a successful round trip after the draw means every later holder
   * draws a later fence. The grant counts from when that round trip was sent: the server ends
   * a silent session no sooner than its timeout after it, however long the lock took to get.
   */
  async grant(
    db: SqlDatabase,
    hold: SessionHold,
    token: string,
    runner: SqlRunner,
  ): Promise<LockGrant | null> {
    const fence = await nextFence(db, hold.key);
    const provedAt = monotonicNow();
    if (!(await connectionAnswers(runner))) return null;
    if (keepsOwnerRow(token, hold)) {
      try {
        await recordOwner(db, hold.key, token, fence, sessionIdOf(runner));
      } catch (err) {
        // Not granted: a row the insert may have left must not name this live session.
        await clearOwner(db, hold.key, token).catch(() => undefined);
        throw err;
      }
    }
    this.record(db, hold, token, runner, provedAt, fence);
    return { fence, grantedAt: provedAt, permit: hold.slot };
  }

  /** Records a held lock and reports it lost the moment its connection dies. */
  private record(
    db: SqlDatabase,
    hold: SessionHold,
    token: string,
    runner: SqlRunner,
    heardAt: number,
    fence: number,
  ): void {
    const { key } = hold;
    const connection = runner.databaseConnection as EventSource | undefined;
    const onDeath = (err?: unknown): void => {
      const pinned = this.held.get(slot(key, token));
      if (!pinned || pinned.runner !== runner) return;
      this.forget(pinned);
      void this.unpin(runner);
      this.lostListener(
        key,
        token,
        `its database connection closed${err instanceof Error ? ` (${db.describe(err)})` : ''}`,
      );
    };
    connection?.on?.('error', onDeath);
    connection?.on?.('end', onDeath);
    this.heldKeys.set(key, (this.heldKeys.get(key) ?? 0) + 1);
    this.held.set(slot(key, token), {
      key,
      token,
      hold,
      runner,
      db,
      fence,
      lastHeard: heardAt,
      keepingAlive: false,
      unwatch: () => {
        connection?.removeListener?.('error', onDeath);
        connection?.removeListener?.('end', onDeath);
        // A later error on a connection back in the pool must not crash the app (added once).
        const listeners = (
          connection as { listeners?(e: string): unknown[] } | undefined
        )?.listeners?.('error');
        if (!listeners?.includes(ignore)) connection?.on?.('error', ignore);
      },
    });
    this.keepAliveTimer ??= setInterval(() => this.keepAlive(), this.keepAliveMs).unref();
  }

  /** The held lock for (key, token), if this process holds it. */
  get(key: string, token: string): Pinned | undefined {
    return this.held.get(slot(key, token));
  }

  /** The fence of the lock of `key` held here, if this process holds it. */
  fenceOf(key: string): number | undefined {
    for (const pinned of this.held.values()) if (pinned.key === key) return pinned.fence;
    return undefined;
  }

  /**
   * Whether (key, token) is still held here: `probe` of its pinned connection says `true`.
   * Otherwise, or when the connection is gone (and the lock with it), the held lock is dropped.
   */
  async stillHeld(
    key: string,
    token: string,
    probe: (pinned: Pinned) => Promise<boolean>,
  ): Promise<boolean> {
    const pinned = this.get(key, token);
    if (!pinned) return false;
    const sentAt = monotonicNow();
    try {
      if (await probe(pinned)) {
        pinned.lastHeard = Math.max(pinned.lastHeard, sentAt);
        return true;
      }
    } catch {
      // the connection is gone, and the lock with it
    }
    await this.drop(pinned);
    return false;
  }

  /** Forgets a held lock and returns its connection to the pool. */
  async drop(pinned: Pinned): Promise<void> {
    if (this.held.get(slot(pinned.key, pinned.token)) !== pinned) return; // already dropped
    this.forget(pinned);
    await this.unpin(pinned.runner);
  }

  /**
   * Shutdown: releases every lock still held here with `release` (a failure means the
   * connection, and the lock, are gone already) and gives each connection back.
   */
  async closeAll(release: (pinned: Pinned) => Promise<unknown>): Promise<void> {
    for (const pinned of [...this.held.values()]) {
      await release(pinned).catch(() => undefined);
      await this.drop(pinned);
    }
  }

  /** Stops tracking a held lock (its connection is given back by the caller). */
  private forget(pinned: Pinned): void {
    this.held.delete(slot(pinned.key, pinned.token));
    const left = (this.heldKeys.get(pinned.key) ?? 1) - 1;
    if (left > 0) this.heldKeys.set(pinned.key, left);
    else this.heldKeys.delete(pinned.key);
    pinned.unwatch();
    if (this.held.size === 0 && this.keepAliveTimer) {
      clearInterval(this.keepAliveTimer);
      this.keepAliveTimer = undefined;
    }
  }

  /**
   * One cheap statement on each held connection the server has not heard from for a
   * keep-alive period. A connection that fails it is dead: its own 'error'/'end' reports the
   * loss; one that hangs is bounded by the server's session timeout.
   */
  private keepAlive(): void {
    const now = monotonicNow();
    for (const pinned of this.held.values()) {
      if (pinned.keepingAlive || now - pinned.lastHeard < this.keepAliveMs) continue;
      pinned.keepingAlive = true;
      void connectionAnswers(pinned.runner).then((answered) => {
        pinned.keepingAlive = false;
        if (answered) pinned.lastHeard = Math.max(pinned.lastHeard, now);
      });
    }
  }
}

/** Minimal event-emitter view of a driver connection. */
interface EventSource {
  on?(event: string, listener: (err?: unknown) => void): unknown;
  removeListener?(event: string, listener: (err?: unknown) => void): unknown;
}

function ignore(): void {
  // The pool discards broken connections itself.
}

function slot(key: string, token: string): string {
  return `${key}\u0000${token}`;
}

/** How many connections of `ds` session locks may pin at once (the rest stay for queries). */
function maxPins(ds: SqlDataSource): number {
  return Math.max(1, poolSize(ds) - RESERVED_CONNECTIONS);
}

/** Pool size of a DataSource (TypeORM `poolSize`, else the driver's own setting, else 10). */
export function poolSize(ds: SqlDataSource): number {
  return poolSizeOf(ds.options);
}

/** Pool size that DataSource options give (see {@link poolSize}). */
export function poolSizeOf(options: { poolSize?: unknown; extra?: unknown }): number {
  const extra = (
    typeof options.extra === 'object' && options.extra !== null ? options.extra : {}
  ) as {
    max?: unknown;
    connectionLimit?: unknown;
  };
  const candidates = [options.poolSize, extra.max, extra.connectionLimit];
  for (const c of candidates) if (typeof c === 'number' && c > 0) return c;
  return DEFAULT_POOL_SIZE;
}

/**
 * One round trip on `runner`: `true` when its connection still answers. A lock bound to the
 * connection is held while it answers; an error means the connection, and the lock, are gone.
 */
export async function connectionAnswers(runner: SqlRunner): Promise<boolean> {
  try {
    await runner.query('SELECT 1 AS alive', [], true);
    return true;
  } catch {
    return false;
  }
}
