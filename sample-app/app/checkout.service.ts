import { Inject, Injectable } from '@nestjs/common';
import { LockService } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { FakePaymentProvider, type Authorization } from './payment-provider';
import { PricingService } from './pricing.service';

/** Key of the counted lock in front of the payment provider (one provider for all SKUs). */
export const PAYMENT_PROVIDER_KEY = 'payment-provider';

/** What a checkout answers. */
export interface CheckoutReceipt {
  sku: string;
  qty: number;
  /** `qty` times the gross price quoted. */
  amountCents: number;
  /** Revision of the price charged. */
  priceRevision: number;
  /** The provider's authorisation, with the connection (the lock's permit) it went through. */
  payment: Authorization & {
    /** Fence of the counted lock's grant. */
    fence: number | null;
  };
}

/**
 * The payment step of a checkout: prices the order (a shared price read), then authorises the
 * amount at the payment provider under a counted lock with as many permits as the provider
 * accepts concurrent requests. At most that many calls run at once across every replica; the
 * rest wait their turn here instead of being refused there. The grant's slot, `lock.permit`,
 * is unique among the current holders, so it names the provider connection to use: no two
 * calls ever share one. Stock is taken separately, by `POST /inventory/:sku/deduct`.
 */
@Injectable()
export class CheckoutService {
  constructor(
    private readonly pricing: PricingService,
    private readonly provider: FakePaymentProvider,
    private readonly locks: LockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Prices `qty` units of `sku` and authorises the payment. */
  async checkout(sku: string, qty: number): Promise<CheckoutReceipt> {
    // The price lock is released before paying: holding it through a slow provider call would
    // keep re-prices waiting for as long as payments queue.
    const quote = await this.pricing.quote(sku);
    const amountCents = quote.grossCents * qty;
    const payment = await this.locks.withLock(
      PAYMENT_PROVIDER_KEY,
      async (lock) => ({
        ...(await this.provider.authorize(lock.permit, amountCents)),
        fence: lock.fence,
      }),
      // One call at a time where the backend has no counted locks (Redlock, MariaDB
      // `advisory`): under the provider's limit, only slower.
      { permits: this.locks.supports('permits') ? this.config.payments.limit : 1 },
    );
    return { sku, qty, amountCents, priceRevision: quote.revision, payment };
  }
}
