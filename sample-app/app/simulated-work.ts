import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Stands in for what a real order does between reading the stock and writing it back
 * (pricing, payment authorisation): `DEDUCT_WORK_MS` of waiting. Every mode pays it, so the
 * modes compare fairly; in the unlocked mode it is the window in which other orders read the
 * same, soon stale, stock.
 */
export async function simulateWork(ms: number): Promise<void> {
  if (ms > 0) await sleep(ms);
}
