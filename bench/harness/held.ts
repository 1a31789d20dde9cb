import type { HeldCommand, HeldMessage, HeldOrders } from './held-worker';
import type { ScaleStore } from './scale-store';
import type { StoreProbe } from './store-probe';
import { forkWorker } from './worker-process';

/** What holding `n` locks at once cost over the steady window. */
export interface HeldResult {
  store: ScaleStore['kind'];
  n: number;
  /** Time to acquire all of them, ms. */
  acquireMs: number;
  /**
   * Store calls per second over the window: Redis, the requests the client sent (a script
   * call is one); PostgreSQL, the statements it sent; null on memory (no store).
   */
  storeCallsPerSec: number | null;
  /** Redis only: commands the node ran per second, those inside scripts included; else null. */
  redisCommandsPerSec: number | null;
  /** The holder's CPU time over the window, % of one core. */
  cpuPercent: number;
  /** Heap growth per held lock after a forced GC, bytes. */
  heapPerLockBytes: number;
  /** Locks lost between their grant and the window's end: the figures only count when 0. */
  lost: number;
  /** Acquisitions that failed (the store did not answer in time): figures only count at 0. */
  notAcquired: number;
  windowMs: number;
}

/** The lease: short, so renewals come often (every second). */
export const HELD_TTL_MS = 3_000;
/** Generous: 100k acquisitions plus the module's boot. */
const HOLD_TIMEOUT_MS = 300_000;

/**
 * Holds `n` locks on the probe's store in a process of its own, lets the renewals settle for a
 * third of the ttl, then measures a steady window of `windowMs`: the holder's CPU, and the store
 * calls over the window (Redis: on the wire, through the probe's proxy; PostgreSQL: counted by
 * the holder's TypeORM logger).
 */
export async function runHeld(
  probe: StoreProbe,
  n: number,
  windowMs: number,
  keyPrefix: string,
): Promise<HeldResult> {
  const { store } = probe;
  const orders: HeldOrders = { store, keyPrefix, n, ttlMs: HELD_TTL_MS };
  const worker = forkWorker<HeldMessage>('bench/harness/held-worker.ts', orders, ['--expose-gc']);
  try {
    const held = await worker.next('held', HOLD_TIMEOUT_MS);
    // Renewals run every ttl/3 from each grant: a second spreads them as they will stay.
    await new Promise((resolve) => setTimeout(resolve, HELD_TTL_MS / 3));
    const commandsBefore = await probe.commands?.();
    const requestsBefore = probe.requests?.();
    const from = performance.now();
    worker.child.send({ type: 'go', windowMs } satisfies HeldCommand);
    const done = await worker.next('done', windowMs + 60_000);
    const requestsAfter = probe.requests?.();
    const seconds = (performance.now() - from) / 1000;
    const commandsAfter = await probe.commands?.();
    const storeCallsPerSec =
      requestsBefore !== undefined && requestsAfter !== undefined
        ? (requestsAfter - requestsBefore) / seconds
        : done.statements !== null
          ? done.statements / (done.windowMs / 1000)
          : null;
    const redisCommandsPerSec =
      commandsBefore !== undefined && commandsAfter !== undefined
        ? (commandsAfter - commandsBefore) / seconds
        : null;
    if (done.stillHeld + done.lost + held.notAcquired !== n) {
      throw new Error(
        `held ${store.kind} ${n}: ${done.stillHeld} held + ${done.lost} lost + ${held.notAcquired} not acquired ≠ ${n}`,
      );
    }
    return {
      store: store.kind,
      n,
      acquireMs: held.acquireMs,
      storeCallsPerSec,
      redisCommandsPerSec,
      cpuPercent: (100 * done.cpuMs) / done.windowMs,
      heapPerLockBytes: held.heapPerLockBytes,
      lost: done.lost,
      notAcquired: held.notAcquired,
      windowMs: done.windowMs,
    };
  } finally {
    await worker.kill();
  }
}
