import { Inject, Injectable } from '@nestjs/common';
import { LockService } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { SegmentedNeedsLockError, SoldOutError, UnknownSkuError } from './inventory.errors';
import { InventoryStore } from './inventory.store';
import { LockedStockService } from './locked-stock.service';
import { OptimisticStockService } from './optimistic-stock.service';
import type { Product } from './product.entity';
import { segmentKey, SegmentedStockService } from './segmented-stock.service';
import type { OrderReceipt, StockPolicy, StocktakeReport } from './stock-policy';
import { UnlockedStockService } from './unlocked-stock.service';

/** What `GET /inventory/:sku` answers: the stock and the ledger's verdict on it. */
export interface ProductView {
  sku: string;
  /** Units on hand (the sum of the segments for a segmented product). */
  stock: number;
  initialStock: number;
  restocked: number;
  /** Orders in the ledger since the last reset. */
  orders: number;
  /** Units sold since the last reset (sum of the ledger's quantities). */
  sold: number;
  /** Units sold beyond what there was: `max(0, sold - initialStock - restocked)`. */
  oversold: number;
  /** `initialStock + restocked - sold === stock`: false means lost updates. */
  consistent: boolean;
  /** Fence of the last locked write (of the product row; segments carry their own). */
  fence: number;
  /** Optimistic version. */
  version: number;
  segments: number;
  segmentStock?: Array<{ segment: number; stock: number; fence: number }>;
  /** Whether the SKU's lock (any segment's, if segmented) is held right now. */
  locked: boolean;
}

/**
 * The inventory use cases behind the controller. Picks the deduction policy from DEDUCT_MODE
 * (and, in lock mode, from whether the product is segmented) and answers the sold-out case
 * early when it can.
 */
@Injectable()
export class InventoryService {
  private readonly policy: StockPolicy;

  constructor(
    private readonly store: InventoryStore,
    private readonly locks: LockService,
    private readonly locked: LockedStockService,
    private readonly segmented: SegmentedStockService,
    optimistic: OptimisticStockService,
    unlocked: UnlockedStockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    const policies: Record<AppConfig['mode'], StockPolicy> = {
      lock: locked,
      optimistic,
      none: unlocked,
    };
    this.policy = policies[config.mode];
  }

  /** The product's stock and ledger totals. */
  async get(sku: string): Promise<ProductView> {
    const product = await this.requireProduct(sku);
    const segmentRows = product.segments > 1 ? await this.store.findSegments(sku) : undefined;
    const stock = segmentRows
      ? segmentRows.reduce((sum, row) => sum + row.stock, 0)
      : product.stock;
    const { orders, units } = await this.store.ledgerTotals(sku);
    const supplied = product.initialStock + product.restocked;
    const keys = segmentRows
      ? segmentRows.map((row) => segmentKey(sku, row.segment))
      : [`stock:${sku}`];
    const held = await Promise.all(keys.map((key) => this.locks.isLocked(key)));
    return {
      sku,
      stock,
      initialStock: product.initialStock,
      restocked: product.restocked,
      orders,
      sold: units,
      oversold: Math.max(0, units - supplied),
      consistent: supplied - units === stock,
      fence: product.fence,
      version: product.version,
      segments: product.segments,
      ...(segmentRows && {
        segmentStock: segmentRows.map(({ segment, stock: units, fence }) => ({
          segment,
          stock: units,
          fence,
        })),
      }),
      locked: held.some(Boolean),
    };
  }

  /** Creates or resets a product (split into `segments`, default SEGMENTS). */
  async reset(sku: string, stock: number, segments = this.config.segments): Promise<ProductView> {
    await this.store.reset(sku, stock, segments);
    return this.get(sku);
  }

  /** Places an order for `qty` units. */
  async deduct(sku: string, qty: number): Promise<OrderReceipt> {
    const product = await this.requireProduct(sku);
    // Fast rejection outside any lock: a sold-out SKU answers at once instead of queueing for
    // the lock only to learn it. Only refusals are decided here; acceptance never is.
    const available = await this.store.available(product);
    if (available < qty) throw new SoldOutError(sku, available, qty);
    if (product.segments > 1) {
      if (this.config.mode !== 'lock') throw new SegmentedNeedsLockError(sku);
      return this.segmented.deduct(sku, qty, product.segments);
    }
    return this.policy.deduct(sku, qty);
  }

  /** Adds `qty` units. */
  async restock(sku: string, qty: number): Promise<ProductView> {
    const product = await this.requireProduct(sku);
    if (product.segments > 1) {
      if (this.config.mode !== 'lock') throw new SegmentedNeedsLockError(sku);
      await this.segmented.restock(sku, qty, product.segments);
    } else {
      await this.policy.restock(sku, qty);
    }
    return this.get(sku);
  }

  /** Holds the SKU's lock(s) for `ms` (409 at once if busy) and counts the stock. */
  async stocktake(sku: string, ms: number): Promise<StocktakeReport> {
    const product = await this.requireProduct(sku);
    return product.segments > 1
      ? this.segmented.stocktake(sku, ms, product.segments)
      : this.locked.stocktake(sku, ms);
  }

  private async requireProduct(sku: string): Promise<Product> {
    const product = await this.store.findProduct(sku);
    if (product === null) throw new UnknownSkuError(sku);
    return product;
  }
}
