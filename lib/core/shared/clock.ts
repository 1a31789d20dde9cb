/**
 * Monotonic milliseconds. Every local deadline uses this, never `Date.now()`, so a wall-clock
 * jump (NTP step, VM resume, faketime) cannot stretch or shrink a lease. Read through the global
 * `performance` on each call, so a test's fake clock (Jest's fake timers replace it) moves
 * leases and renewals together with the timers it fakes.
 */
export function monotonicNow(): number {
  return globalThis.performance.now();
}
