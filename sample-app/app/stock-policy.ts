import type { Lock } from '../../lib/index';
import type { DeductMode } from './app-config';
import { SoldOutError, UnknownSkuError } from './inventory.errors';
import type { NewOrder } from './inventory.store';
import type { Product } from './product.entity';

/** What an accepted order answers. */
export interface OrderReceipt {
  orderId: string;
  sku: string;
  qty: number;
  /** Units left where this order took them from (the product, or its segment). */
  stockLeft: number;
  /** Segment the units came from, `null` for an unsegmented product. */
  segment: number | null;
  /** Fence of the lock the write was made under, `null` without a lock. */
  fence: number | null;
  mode: DeductMode;
}

/** What a stocktake answers. */
export interface StocktakeReport {
  sku: string;
  stock: number;
  /** How long the SKU's lock(s) were held. */
  heldMs: number;
  /** Fence(s) of the lock(s) held. */
  fences: Array<number | null>;
}

/** How one deduction mode deducts and restocks a product. */
export interface StockPolicy {
  /** Takes `qty` units of `sku`, or throws an HTTP error saying why not. */
  deduct(sku: string, qty: number): Promise<OrderReceipt>;
  /** Adds `qty` units to `sku`. */
  restock(sku: string, qty: number): Promise<void>;
}

/**
 * `product` when it exists and has `qty` units on hand, read before the work: otherwise the
 * answer every mode gives, 404 UNKNOWN_SKU or 422 SOLD_OUT.
 */
export function requireStock(product: Product | null, sku: string, qty: number): Product {
  if (product === null) throw new UnknownSkuError(sku);
  if (product.stock < qty) throw new SoldOutError(sku, product.stock, qty);
  return product;
}

/** The receipt of an order once written, `stockLeft` units left where it took them from. */
export function receiptOf(order: NewOrder, stockLeft: number): OrderReceipt {
  return {
    orderId: order.id,
    sku: order.sku,
    qty: order.qty,
    stockLeft,
    segment: order.segment,
    fence: order.fence,
    mode: order.mode,
  };
}

/**
 * The fencing token of a held lock guarding a write (stock, price). Every backend the app
 * configures issues one; a lock without it would make the database's `fence < ?` guard void,
 * so the write is refused.
 */
export function fenceOf(lock: Lock | undefined): number {
  if (lock === undefined || lock.fence === null) {
    throw new Error('the lock has no fencing token; refusing an unguarded write');
  }
  return lock.fence;
}
