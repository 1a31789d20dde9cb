import { Body, Controller, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import {
  PricingService,
  type PriceQuote,
  type PriceView,
  type RepriceReport,
} from './pricing.service';
import { IntegerFieldPipe, SkuPipe } from './validation.pipes';

/** Highest price accepted, in cents. */
const MAX_CENTS = 100_000_000;

/** HTTP API of the price list (errors as in InventoryController, plus 404 NO_PRICE). */
@Controller('prices')
export class PricingController {
  constructor(private readonly pricing: PricingService) {}

  /** The price, read under the shared price lock. */
  @Get(':sku')
  quote(@Param('sku', SkuPipe) sku: string): Promise<PriceQuote> {
    return this.pricing.quote(sku);
  }

  /** The same read without the lock: may be torn while a re-price runs (the contrast). */
  @Get(':sku/unlocked')
  quoteUnlocked(@Param('sku', SkuPipe) sku: string): Promise<PriceQuote> {
    return this.pricing.quoteUnlocked(sku);
  }

  /** Sets or resets the price: `{ "netCents": 1000 }`. */
  @Put(':sku')
  reset(
    @Param('sku', SkuPipe) sku: string,
    @Body('netCents', new IntegerFieldPipe('netCents', 0, MAX_CENTS)) netCents: number,
  ): Promise<PriceView> {
    return this.pricing.reset(sku, netCents);
  }

  /** Re-prices in two steps under the exclusive price lock: `{ "netCents": 1200 }`. */
  @Post(':sku/reprice')
  @HttpCode(200)
  reprice(
    @Param('sku', SkuPipe) sku: string,
    @Body('netCents', new IntegerFieldPipe('netCents', 0, MAX_CENTS)) netCents: number,
  ): Promise<RepriceReport> {
    return this.pricing.reprice(sku, netCents);
  }
}
