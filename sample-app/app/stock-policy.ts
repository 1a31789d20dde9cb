import type { DeductMode } from './app-config';

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
