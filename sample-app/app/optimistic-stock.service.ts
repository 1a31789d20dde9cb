import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './app-config';
import { ContentionError, UnknownSkuError } from './inventory.errors';
import { InventoryStore } from './inventory.store';
import { simulateWork } from './simulated-work';
import { receiptOf, requireStock, type OrderReceipt, type StockPolicy } from './stock-policy';

/**
 * Attempts before giving up with 409 CONTENTION. Under a burst on one SKU each round has one
 * winner, so the budget must cover roughly the number of orders in flight on it.
 */
const MAX_ATTEMPTS = 60;
/** Upper bound of the random pause between attempts, so losers do not retry in lock-step. */
const MAX_BACKOFF_MS = 20;

/**
 * DEDUCT_MODE=optimistic: no lock. Read the product and its version, do the work, then write
 * only if the version is unchanged (compare-and-set); if another order wrote first, read again
 * and retry. Never oversells and holds nothing while working, but under heavy contention on
 * one row most attempts are wasted, and an order may give up (409) while stock remains.
 */
@Injectable()
export class OptimisticStockService implements StockPolicy {
  constructor(
    private readonly store: InventoryStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Deducts with version-checked retries. */
  async deduct(sku: string, qty: number): Promise<OrderReceipt> {
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const product = requireStock(await this.store.findProduct(sku), sku, qty);
      await simulateWork(this.config.workMs);
      const order = this.store.newOrder({
        sku,
        qty,
        segment: null,
        fence: null,
        mode: 'optimistic',
      });
      if (await this.store.casDeduct(order, product.version)) {
        return receiptOf(order, product.stock - qty);
      }
      await sleep(Math.random() * Math.min(MAX_BACKOFF_MS, attempt * 2));
    }
    throw new ContentionError(sku, MAX_ATTEMPTS);
  }

  /** Restocks with version-checked retries. */
  async restock(sku: string, qty: number): Promise<void> {
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const product = await this.store.findProduct(sku);
      if (product === null) throw new UnknownSkuError(sku);
      if (await this.store.casRestock(sku, qty, product.version)) return;
      await sleep(Math.random() * Math.min(MAX_BACKOFF_MS, attempt * 2));
    }
    throw new ContentionError(sku, MAX_ATTEMPTS);
  }
}
