import { startLocks } from './nest-locks';
import { scaleModuleOptions, type ScaleStore } from './scale-store';
import type { StoreProbe } from './store-probe';

/** What locking `n` distinct keys once each left in the store. */
export interface DistinctKeysResult {
  store: ScaleStore['kind'];
  n: number;
  /** Store footprint (keys, rows or znodes: see StoreProbe.footprint) before the first lock. */
  before: number;
  /** Right after the last release. */
  after: number;
  /** {@link SETTLE_MS} later, the module still running (its own tidying done). */
  settled: number;
  /** Acquire + release cycles per second, {@link CONCURRENCY} in flight. */
  cyclesPerSec: number;
}

/** Cycles in flight at once: enough to keep the store busy, as a busy service would. */
const CONCURRENCY = 32;
/** Past the ZooKeeper backend's tidy delay for emptied key nodes (2 s). */
export const SETTLE_MS = 3_000;

/**
 * Locks and releases `n` distinct keys once each on `store` (in this process: only the store's
 * footprint is measured, not the client) and counts what the store holds before, right after,
 * and {@link SETTLE_MS} after.
 */
export async function runDistinctKeys(
  store: ScaleStore,
  n: number,
  probe: StoreProbe,
  keyPrefix: string,
): Promise<DistinctKeysResult> {
  const app = await startLocks(
    scaleModuleOptions(store, { ttl: 30_000, waitTimeout: 10_000 }, keyPrefix),
  );
  try {
    const before = await probe.footprint();
    const started = performance.now();
    let next = 0;
    const cycler = async (): Promise<void> => {
      for (let i = next++; i < n; i = next++) {
        await (await app.locks.acquire(`key-${i}`)).release();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, cycler));
    const cyclesPerSec = n / ((performance.now() - started) / 1000);
    const after = await probe.footprint();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const settled = await probe.footprint();
    return { store: store.kind, n, before, after, settled, cyclesPerSec };
  } finally {
    await app.close();
  }
}
