import { performance } from 'node:perf_hooks';

/**
 * Monotonic milliseconds. Every local deadline uses this, never `Date.now()`, so a wall-clock
 * jump (NTP step, VM resume, faketime) cannot stretch or shrink a lease.
 */
export function monotonicNow(): number {
  return performance.now();
}
