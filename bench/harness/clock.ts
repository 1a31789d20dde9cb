/**
 * Machine-wide monotonic time in milliseconds (CLOCK_MONOTONIC through `process.hrtime`), so
 * timestamps taken in different worker processes can be compared: `performance.now()` counts
 * from each process's own start.
 */
export function machineNowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * Sleeps `ms` on a timer, as a critical section waiting on I/O would, without burning CPU:
 * on 2 cores a spinning holder would take a core from the store and the next holder. Timers
 * overshoot a little (a 2 ms hold lasts ~2.1 ms), so the bench measures each hold and uses
 * the measured mean in its ideal rate.
 */
export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
