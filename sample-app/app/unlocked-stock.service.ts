import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './app-config';
import { SoldOutError, UnknownSkuError } from './inventory.errors';
import { InventoryStore } from './inventory.store';
import { simulateWork } from './simulated-work';
import type { OrderReceipt, StockPolicy } from './stock-policy';

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
    const product = await this.store.findProduct(sku);
    if (product === null) throw new UnknownSkuError(sku);
    if (product.stock < qty) throw new SoldOutError(sku, product.stock, qty);
    await simulateWork(this.config.workMs); // others read the same stock meanwhile
    const order = this.store.newOrder({ sku, qty, segment: null, fence: null, mode: 'none' });
    await this.store.overwriteStock(order, product.stock - qty);
    return {
      orderId: order.id,
      sku,
      qty,
      stockLeft: product.stock - qty,
      segment: null,
      fence: null,
      mode: 'none',
    };
  }

  /** An atomic increment: correct without a lock, there is nothing to read first. */
  async restock(sku: string, qty: number): Promise<void> {
    if (!(await this.store.addStock(sku, qty))) throw new UnknownSkuError(sku);
  }
}
