import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { Locked, LockService } from '../../lib/index';
import { APP_CONFIG, type AppConfig } from './app-config';
import { ConcurrencyGauge, type Span } from './concurrency-gauge';
import { NoPriceError, StaleFenceError } from './inventory.errors';
import { grossOf, type Price } from './price.entity';
import { PriceStore } from './price.store';
import { fenceOf } from './stock-policy';

/** A price line as stored. */
export interface PriceView {
  sku: string;
  netCents: number;
  grossCents: number;
  revision: number;
  fence: number;
}

/** What a price read answers. */
export interface PriceQuote extends PriceView {
  /**
   * The quote saw one whole price: net and gross agreed in both of its reads, and nothing
   * changed between them. `false` is a torn read: a re-price was half done.
   */
  consistent: boolean;
  /** Read under the shared price lock (`false`: the unlocked contrast). */
  locked: boolean;
  /** Fence of the shared lock the read held, `null` unlocked. */
  readFence: number | null;
  /** Price reads of this kind running in this process as this one began, itself included. */
  readers: number;
  /** When the read ran (compare across processes to count overlapping readers). */
  span: Span;
}

/** What a re-price answers. */
export interface RepriceReport extends PriceView {
  /** When the re-price held its exclusive lock's critical section. */
  span: Span;
}

/** Key of a SKU's price lock (prefixed with the app's `inventory:` namespace). */
export const priceKey = (sku: string): string => `price:${sku}`;

/**
 * The price list, read far more often than it is written. Reads take the SKU's price lock in
 * `shared` mode, so any number of them run at once (on every replica); a re-price takes it
 * `exclusive`, so it waits for the reads in progress, holds new ones back (a waiting writer
 * blocks new readers, so a steady stream of reads cannot starve it), and no read ever sees a
 * price it has half written.
 */
@Injectable()
export class PricingService {
  private readonly lockedReads = new ConcurrencyGauge();
  private readonly unlockedReads = new ConcurrencyGauge();

  constructor(
    private readonly store: PriceStore,
    private readonly locks: LockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Sets (or resets) a SKU's price; administrative, not for use while re-prices run. */
  async reset(sku: string, netCents: number): Promise<PriceView> {
    await this.store.reset(sku, netCents);
    return viewOf(await this.requirePrice(sku));
  }

  /** Reads the price under the shared price lock: never torn, overlapping other reads. */
  quote(sku: string): Promise<PriceQuote> {
    // `shared` where the backend grants it (every one but Redlock and MariaDB `advisory`); on
    // those the read takes the key exclusively: still never torn, only not concurrent. A
    // `@Locked('price:{0}', { mode: 'shared' })` would stop such an app at bootstrap instead.
    const mode = this.locks.supports('shared') ? 'shared' : 'exclusive';
    return this.locks.withLock(
      priceKey(sku),
      (lock) => this.read(sku, this.lockedReads, { fence: lock.fence }),
      { mode },
    );
  }

  /**
   * The same read without the lock: the contrast that shows what the lock prevents. It may
   * land between a re-price's two writes and see a torn price. Never price an order this way.
   */
  quoteUnlocked(sku: string): Promise<PriceQuote> {
    return this.read(sku, this.unlockedReads, undefined);
  }

  /**
   * Re-prices in two steps under the exclusive price lock: first the net price, then (after
   * REPRICE_STEP_MS, standing in for recomputing a price list) the gross price. Each write
   * carries the lock's fence, so a re-pricer overtaken after a lost lock changes nothing.
   */
  @Locked('price:{0}', { mode: 'exclusive' })
  async reprice(sku: string, netCents: number): Promise<RepriceReport> {
    const fence = fenceOf(this.locks.current());
    const start = process.hrtime.bigint();
    if (!(await this.store.writeNet(sku, netCents, fence))) throw await this.refusal(sku, fence);
    await sleep(this.config.pricing.repriceStepMs);
    if (!(await this.store.writeGross(sku, grossOf(netCents), fence))) {
      throw await this.refusal(sku, fence);
    }
    const end = process.hrtime.bigint();
    return {
      ...viewOf(await this.requirePrice(sku)),
      span: { start: String(start), end: String(end) },
    };
  }

  /**
   * Reads the price twice, PRICE_READ_MS apart (rendering the quote): a whole price read
   * under the lock stays the same throughout, so both reads must agree. `lock` is the shared
   * lock held, `undefined` for the unlocked read.
   */
  private async read(
    sku: string,
    gauge: ConcurrencyGauge,
    lock: { fence: number | null } | undefined,
  ): Promise<PriceQuote> {
    const { value, span, concurrent } = await gauge.measure(async () => {
      const first = await this.requirePrice(sku);
      if (this.config.pricing.readMs > 0) await sleep(this.config.pricing.readMs);
      return { first, second: await this.requirePrice(sku) };
    });
    const { first, second } = value;
    const consistent =
      isWhole(first) &&
      isWhole(second) &&
      first.revision === second.revision &&
      first.netCents === second.netCents;
    return {
      ...viewOf(first),
      consistent,
      locked: lock !== undefined,
      readFence: lock?.fence ?? null,
      readers: concurrent,
      span,
    };
  }

  private async requirePrice(sku: string): Promise<Price> {
    const price = await this.store.find(sku);
    if (price === null) throw new NoPriceError(sku);
    return price;
  }

  /** Why a fenced price write changed nothing: the price is gone, or a newer holder wrote. */
  private async refusal(sku: string, fence: number): Promise<Error> {
    const price = await this.requirePrice(sku);
    return new StaleFenceError(priceKey(sku), fence, price.fence, 'the price');
  }
}

/** Net and gross agree: no re-price is half done in this row. */
function isWhole(price: Price): boolean {
  return price.grossCents === grossOf(price.netCents);
}

function viewOf(price: Price): PriceView {
  const { sku, netCents, grossCents, revision, fence } = price;
  return { sku, netCents, grossCents, revision, fence };
}
