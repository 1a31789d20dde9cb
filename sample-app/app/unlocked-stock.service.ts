import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './app-config';
import { UnknownSkuError } from './inventory.errors';
import { InventoryStore } from './inventory.store';
import { simulateWork } from './simulated-work';
import { receiptOf, requireStock, type OrderReceipt, type StockPolicy } from './stock-policy';

/**
 * DEDUCT_MODE=none: the bug this library exists to prevent, kept on purpose for the demo.
 * Read the stock, check it, do the work, write back `read - qty`. Orders running at the same
 * time (in this process or any other) read the same stock, all pass the check, and each writes
 * its own result over the others': stock is decremented once for many orders, and more units
 * are sold than there were.
 */
@Injectable()
export class UnlockedStockService implements StockPolicy {
  constructor(
    private readonly store: InventoryStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Unprotected read-modify-write. */
  async deduct(sku: string, qty: number): Promise<OrderReceipt> {
    const product = requireStock(await this.store.findProduct(sku), sku, qty);
    await simulateWork(this.config.workMs); // others read the same stock meanwhile
    const order = this.store.newOrder({ sku, qty, segment: null, fence: null, mode: 'none' });
    await this.store.overwriteStock(order, product.stock - qty);
    return receiptOf(order, product.stock - qty);
  }

  /** An atomic increment: correct without a lock, there is nothing to read first. */
  async restock(sku: string, qty: number): Promise<void> {
    if (!(await this.store.addStock(sku, qty))) throw new UnknownSkuError(sku);
  }
}
