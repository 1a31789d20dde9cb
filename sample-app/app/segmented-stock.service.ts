import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { LockService, type Lock } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { SoldOutError, StaleFenceError, UnknownSkuError } from './inventory.errors';
import { InventoryStore, splitEvenly } from './inventory.store';
import { simulateWork } from './simulated-work';
import { fenceOf, receiptOf, type OrderReceipt, type StocktakeReport } from './stock-policy';

/** The lock key of one segment of a SKU's stock. */
export function segmentKey(sku: string, segment: number): string {
  return `stock:${sku}:${segment}`;
}

/**
 * DEDUCT_MODE=lock, segmented products (SEGMENTS > 1 when the product was created): the stock
 * is split into N rows, each with its own lock, so up to N orders for one SKU proceed at once
 * instead of queueing on a single lock. An order starts at a random segment and takes the
 * first free one with enough stock (tryAcquire, no waiting); only when every segment that may
 * still have stock is busy does it queue on one of them. The price: an order must fit in one
 * segment, and "sold out" is only known after visiting every segment.
 */
@Injectable()
export class SegmentedStockService {
  constructor(
    private readonly store: InventoryStore,
    private readonly locks: LockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Deducts `qty` units of a product split into `segments` rows. */
  async deduct(sku: string, qty: number, segments: number): Promise<OrderReceipt> {
    const start = randomInt(segments);
    const visitOrder = Array.from({ length: segments }, (_, i) => (start + i) % segments);
    const drained = new Set<number>(); // seen, under its lock, with too little stock
    const deadline = performance.now() + this.config.lock.waitMs;
    for (;;) {
      for (const segment of visitOrder) {
        if (drained.has(segment)) continue;
        const lock = await this.locks.tryAcquire(segmentKey(sku, segment));
        if (lock === null) continue; // busy: someone is selling from it, try the next
        const receipt = await this.deductHolding(lock, sku, segment, qty);
        if (receipt !== null) return receipt;
        drained.add(segment);
      }
      const open = visitOrder.filter((segment) => !drained.has(segment));
      if (open.length === 0) {
        throw new SoldOutError(sku, 0, qty, ' (segmented stock: an order must fit in one segment)');
      }
      // Every segment that may still have stock is busy: queue on one of them. Its lock is
      // released within one order's time, so this waits about as long as the single lock would
      // for one order, not for the whole queue. Out of time: LockNotAcquiredError, i.e. 409.
      const segment = open[randomInt(open.length)];
      const lock = await this.locks.acquire(segmentKey(sku, segment), {
        waitTimeout: Math.max(0, deadline - performance.now()),
      });
      const receipt = await this.deductHolding(lock, sku, segment, qty);
      if (receipt !== null) return receipt;
      drained.add(segment);
    }
  }

  /** Spreads a restock over the segments, each under its own lock and fence. */
  async restock(sku: string, qty: number, segments: number): Promise<void> {
    const shares = splitEvenly(qty, segments);
    for (const [segment, units] of shares.entries()) {
      if (units === 0) continue;
      await this.locks.withLock(segmentKey(sku, segment), async (lock) => {
        const fence = fenceOf(lock);
        if (!(await this.store.fencedSegmentRestock(sku, segment, units, fence))) {
          const row = await this.store.findSegment(sku, segment);
          if (row === null) throw new UnknownSkuError(sku);
          throw new StaleFenceError(segmentKey(sku, segment), fence, row.fence);
        }
      });
    }
  }

  /** Holds every segment's lock (all or none, never waiting) for `ms`, then counts. */
  async stocktake(sku: string, ms: number, segments: number): Promise<StocktakeReport> {
    const keys = Array.from({ length: segments }, (_, i) => segmentKey(sku, i));
    return this.locks.withLock(
      keys,
      async (lock) => {
        const started = performance.now();
        await sleep(ms);
        const rows = await this.store.findSegments(sku);
        return {
          sku,
          stock: rows.reduce((sum, row) => sum + row.stock, 0),
          heldMs: Math.round(performance.now() - started),
          fences: [...lock.fences],
        };
      },
      { waitTimeout: 0 },
    );
  }

  /**
   * With `lock` held on the segment: the receipt, or `null` when the segment has too little
   * stock. Always releases the lock.
   */
  private async deductHolding(
    lock: Lock,
    sku: string,
    segment: number,
    qty: number,
  ): Promise<OrderReceipt | null> {
    try {
      const fence = fenceOf(lock);
      const row = await this.store.findSegment(sku, segment);
      if (row === null || row.stock < qty) return null;
      await simulateWork(this.config.workMs);
      const order = this.store.newOrder({ sku, qty, segment, fence, mode: 'lock' });
      if (await this.store.fencedSegmentDeduct({ ...order, segment }, fence)) {
        return receiptOf(order, row.stock - qty);
      }
      const now = await this.store.findSegment(sku, segment);
      if (now !== null && now.fence >= fence) {
        throw new StaleFenceError(segmentKey(sku, segment), fence, now.fence);
      }
      return null;
    } finally {
      await lock.release().catch(() => undefined); // a failed release ends by the ttl
    }
  }
}
