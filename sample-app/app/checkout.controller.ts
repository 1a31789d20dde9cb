import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { CheckoutService, type CheckoutReceipt } from './checkout.service';
import { FakePaymentProvider, type ProviderStats } from './payment-provider';
import { IntegerFieldPipe, SkuPipe } from './validation.pipes';

/** Largest quantity in one checkout. */
const MAX_UNITS = 1_000_000;

/** HTTP API of checkout payments and of the fake provider's counters. */
@Controller()
export class CheckoutController {
  constructor(
    private readonly checkouts: CheckoutService,
    private readonly provider: FakePaymentProvider,
  ) {}

  /** Prices and pays `{ "qty": 1 }` units; 201 with the receipt. */
  @Post('checkout/:sku')
  checkout(
    @Param('sku', SkuPipe) sku: string,
    @Body('qty', new IntegerFieldPipe('qty', 1, MAX_UNITS)) qty: number,
  ): Promise<CheckoutReceipt> {
    return this.checkouts.checkout(sku, qty);
  }

  /** What this process's fake provider has seen (calls, max concurrency, refusals). */
  @Get('payments/provider')
  providerStats(): ProviderStats {
    return this.provider.stats();
  }
}
