import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { Locked, LockService } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { SoldOutError, StaleFenceError, UnknownSkuError } from './inventory.errors';
import { InventoryStore } from './inventory.store';
import { simulateWork } from './simulated-work';
import {
  fenceOf,
  receiptOf,
  requireStock,
  type OrderReceipt,
  type StockPolicy,
  type StocktakeReport,
} from './stock-policy';

/**
 * DEDUCT_MODE=lock, unsegmented products: one lock per SKU (`stock:{sku}`), held across the
 * whole read-check-write, so two orders never act on the same stock reading, in any process.
 * The write also carries the lock's fence, which the database compares with the last one it
 * accepted: a holder whose lock expired behind its back (a GC pause, a frozen VM) and was
 * granted to someone else cannot write over the newer holder's work, even though it never
 * noticed the loss in time.
 */
@Injectable()
export class LockedStockService implements StockPolicy {
  constructor(
    private readonly store: InventoryStore,
    private readonly locks: LockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Deducts under the SKU's lock (waits up to LOCK_WAIT_MS, else the library answers 409). */
  @Locked('stock:{0}')
  async deduct(sku: string, qty: number): Promise<OrderReceipt> {
    const fence = this.fence();
    const product = requireStock(await this.store.findProduct(sku), sku, qty);
    await simulateWork(this.config.workMs);
    // Deliberately no "is the lock still held?" check here: it could pass and the lock still
    // expire before the UPDATE lands. The fence in the UPDATE is what actually decides.
    const order = this.store.newOrder({ sku, qty, segment: null, fence, mode: 'lock' });
    if (!(await this.store.fencedDeduct(order, fence))) throw await this.refusal(sku, qty, fence);
    return receiptOf(order, product.stock - qty);
  }

  /** Restocks under the SKU's lock, fenced like a deduction. */
  @Locked('stock:{0}')
  async restock(sku: string, qty: number): Promise<void> {
    const fence = this.fence();
    if (!(await this.store.fencedRestock(sku, qty, fence))) {
      const product = await this.store.findProduct(sku);
      if (product === null) throw new UnknownSkuError(sku);
      throw new StaleFenceError(`stock:${sku}`, fence, product.fence);
    }
  }

  /**
   * Holds the SKU's lock for `ms` while "counting" it, so deductions meanwhile wait (and
   * answer 409 once LOCK_WAIT_MS runs out). Never waits itself: a second stocktake of a busy
   * SKU answers 409 at once.
   */
  @Locked('stock:{0}', { waitTimeout: 0 })
  async stocktake(sku: string, ms: number): Promise<StocktakeReport> {
    const fence = this.fence();
    const started = performance.now();
    await sleep(ms);
    const product = await this.store.findProduct(sku);
    if (product === null) throw new UnknownSkuError(sku);
    return {
      sku,
      stock: product.stock,
      heldMs: Math.round(performance.now() - started),
      fences: [fence],
    };
  }

  /** The fence of the lock `@Locked` holds for this call. */
  private fence(): number {
    return fenceOf(this.locks.current());
  }

  /** Why a fenced deduction changed nothing: overtaken by a newer holder, or out of stock. */
  private async refusal(sku: string, qty: number, fence: number): Promise<Error> {
    const product = await this.store.findProduct(sku);
    if (product === null) return new UnknownSkuError(sku);
    if (product.fence >= fence) return new StaleFenceError(`stock:${sku}`, fence, product.fence);
    return new SoldOutError(sku, product.stock, qty);
  }
}
