import type { LockGrant, LockMode } from '../../core/contract/lock-backend';

/**
 * The memory backend's record of one key (its holders and its queue) and the pure rules over
 * it: who is live, who is admitted, which slot is free. No clock or timer of its own: callers
 * pass `now`.
 */

/**
 * One holder of a key. It is also the grant handed to the engine (which reads `fence`,
 * `grantedAt` and `permit`): one object per grant, as when the grant was all there was.
 */
export interface Holder extends LockGrant {
  readonly token: string;
  readonly mode: LockMode;
  readonly fence: number;
  readonly permit: number;
  readonly grantedAt: number;
  expiresAt: number;
}

export interface Waiter {
  readonly token: string;
  readonly ttlMs: number;
  readonly mode: LockMode;
  readonly resolve: (grant: LockGrant | null) => void;
  readonly cleanup: () => void;
}

/** One key: its holders and its queue, flat in one object. */
export interface Entry {
  /**
   * The holders: one (a mutex, or a lone reader or slot; no array) or several (readers, or
   * slots of a counted lock); `undefined` when free. May include holders whose lease ran out:
   * every read checks `expiresAt`, and `settle` drops them.
   */
  holders: Holder | Holder[] | undefined;
  /**
   * `permits` every holder and waiter of the key asked for (they must agree); set by the
   * first one while the key is idle (no live holder, no waiter).
   */
  permits: number;
  /** FIFO of waiters; created by the first one. */
  waiters: Waiter[] | undefined;
  /**
   * Hands the lock on when the earliest holder's lease runs out, armed only while someone waits
   * for it: a holder nobody waits for expires by the clock alone (every read checks
   * `expiresAt`), so an uncontended lock costs no timer (a timer per grant was a fifth of a
   * memory cycle and ~230 bytes per held lock).
   */
  timer: NodeJS.Timeout | undefined;
}

export function hasWaiters(entry: Entry): boolean {
  return entry.waiters !== undefined && entry.waiters.length > 0;
}

/**
 * Whether the key's holders (expired ones already dropped) let a request of `mode` in, under
 * the key's agreed `permits`: a free key admits anything; `shared` joins `shared` holders;
 * `exclusive` joins only the holders of a counted lock, while a slot is free.
 */
export function admits(entry: Entry, mode: LockMode): boolean {
  const holders = entry.holders;
  if (holders === undefined) return true;
  const first = Array.isArray(holders) ? holders[0] : holders;
  if (mode === 'shared') return first.mode === 'shared';
  const count = Array.isArray(holders) ? holders.length : 1;
  return first.mode === 'exclusive' && count < entry.permits;
}

/** The lowest slot no holder of a counted lock holds (the caller checked one is free). */
export function freeSlot(entry: Entry): number {
  const holders = entry.holders!;
  const used = new Set<number>();
  if (Array.isArray(holders)) for (const h of holders) used.add(h.permit);
  else used.add(holders.permit);
  let slot = 0;
  while (used.has(slot)) slot++;
  return slot;
}

export function findHolder(entry: Entry, token: string): Holder | undefined {
  const holders = entry.holders;
  if (holders === undefined) return undefined;
  if (!Array.isArray(holders)) return holders.token === token ? holders : undefined;
  return holders.find((h) => h.token === token);
}

export function removeHolder(entry: Entry, holder: Holder): void {
  const holders = entry.holders;
  if (holders === holder) {
    entry.holders = undefined;
  } else if (Array.isArray(holders)) {
    const i = holders.indexOf(holder);
    if (i >= 0) holders.splice(i, 1);
    collapse(entry, holders);
  }
}

/** Drops holders whose lease ran out by `now`. */
export function pruneExpired(entry: Entry, now: number): void {
  const holders = entry.holders;
  if (holders === undefined) return;
  if (!Array.isArray(holders)) {
    if (now >= holders.expiresAt) entry.holders = undefined;
    return;
  }
  let kept = 0;
  for (const h of holders) if (now < h.expiresAt) holders[kept++] = h;
  holders.length = kept;
  collapse(entry, holders);
}

/** Back to no array for one holder or none (the common case stays array-free). */
export function collapse(entry: Entry, holders: Holder[]): void {
  if (holders.length === 0) entry.holders = undefined;
  else if (holders.length === 1) entry.holders = holders[0];
}

/** Whether a holder's lease has not run out by `now`. */
export function isHeld(entry: Entry, now: number): boolean {
  const holders = entry.holders;
  if (holders === undefined) return false;
  if (!Array.isArray(holders)) return now < holders.expiresAt;
  return holders.some((h) => now < h.expiresAt);
}

const NO_HOLDERS: readonly Holder[] = [];

/** Holders whose lease has not run out by `now` (reads only). */
export function liveHolders(entry: Entry, now: number): readonly Holder[] {
  const holders = entry.holders;
  if (holders === undefined) return NO_HOLDERS;
  if (!Array.isArray(holders)) return now < holders.expiresAt ? [holders] : NO_HOLDERS;
  return holders.filter((h) => now < h.expiresAt);
}
