import { Pulse } from '../../core/shared/wake-up';

/**
 * How many connections of a backend may wait in the database at once (`maxWaitingConnections`).
 * A waiting connection is pinned for as long as the wait lasts, so each one is a connection that
 * ordinary queries (the app's, and the lock's own fence draws) cannot have: the cap keeps most
 * of the pool for them. A waiter that finds no slot free is not refused: it tries without
 * waiting and sleeps until a slot frees ({@link freed}) or its back-off passes.
 */
export class DatabaseWaitSlots {
  private used = 0;
  /** Fires each time a slot is given back. */
  readonly freed = new Pulse();

  /** Takes a slot if fewer than `limit` are in use. */
  tryTake(limit: number): boolean {
    if (this.used >= limit) return false;
    this.used++;
    return true;
  }

  /** Gives a slot back (the wait on it is over). */
  give(): void {
    this.used--;
    this.freed.fire();
  }
}

/**
 * The default `maxWaitingConnections` for a pool of `poolSize`: a quarter of it (at least one),
 * and never more than the pool minus two, so one connection stays free for ordinary queries and
 * one for a holder however many keys are waited on (a pool of two: no database waits, waiters
 * try and sleep).
 */
export function defaultWaitingConnections(poolSize: number): number {
  return Math.max(0, Math.min(Math.max(1, Math.floor(poolSize / 4)), poolSize - 2));
}

/** The largest `maxWaitingConnections` a pool of `poolSize` allows (see defaultWaitingConnections). */
export function maxWaitingConnectionsFor(poolSize: number): number {
  return Math.max(0, poolSize - 2);
}
