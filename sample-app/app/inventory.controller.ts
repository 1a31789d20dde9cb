import { Body, Controller, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { InventoryService, type ProductView } from './inventory.service';
import type { OrderReceipt, StocktakeReport } from './stock-policy';
import { IntegerFieldPipe, SkuPipe } from './validation.pipes';

/** Largest quantity, stock or restock accepted in one request. */
const MAX_UNITS = 1_000_000;
/** Longest stocktake: it blocks the SKU's orders meanwhile. */
const MAX_STOCKTAKE_MS = 30_000;

/**
 * HTTP API of the inventory. Bodies are JSON; errors have `statusCode`, `code`, `message`:
 * 400 BAD_INPUT, 404 UNKNOWN_SKU, 422 SOLD_OUT, 409 LOCK_NOT_ACQUIRED (busy lock, from the
 * library) / STALE_FENCE / LOCK_LOST / CONTENTION, 503 LOCK_BACKEND.
 */
@Controller('inventory')
export class InventoryController {
  constructor(private readonly inventory: InventoryService) {}

  /** Stock, ledger totals and the consistency verdict of a product. */
  @Get(':sku')
  get(@Param('sku', SkuPipe) sku: string): Promise<ProductView> {
    return this.inventory.get(sku);
  }

  /** Creates or resets a product: `{ "stock": 50, "segments"?: 4 }`. */
  @Put(':sku')
  reset(
    @Param('sku', SkuPipe) sku: string,
    @Body('stock', new IntegerFieldPipe('stock', 0, MAX_UNITS)) stock: number,
    @Body('segments', new IntegerFieldPipe('segments', 1, 64, true)) segments?: number,
  ): Promise<ProductView> {
    return this.inventory.reset(sku, stock, segments);
  }

  /** Places an order: `{ "qty": 1 }`; 201 with the receipt. */
  @Post(':sku/deduct')
  deduct(
    @Param('sku', SkuPipe) sku: string,
    @Body('qty', new IntegerFieldPipe('qty', 1, MAX_UNITS)) qty: number,
  ): Promise<OrderReceipt> {
    return this.inventory.deduct(sku, qty);
  }

  /** Adds stock: `{ "qty": 10 }`. */
  @Post(':sku/restock')
  @HttpCode(200)
  restock(
    @Param('sku', SkuPipe) sku: string,
    @Body('qty', new IntegerFieldPipe('qty', 1, MAX_UNITS)) qty: number,
  ): Promise<ProductView> {
    return this.inventory.restock(sku, qty);
  }

  /** Holds the SKU's lock for `{ "ms": 2000 }` while counting; 409 at once if it is busy. */
  @Post(':sku/stocktake')
  @HttpCode(200)
  stocktake(
    @Param('sku', SkuPipe) sku: string,
    @Body('ms', new IntegerFieldPipe('ms', 1, MAX_STOCKTAKE_MS)) ms: number,
  ): Promise<StocktakeReport> {
    return this.inventory.stocktake(sku, ms);
  }
}
