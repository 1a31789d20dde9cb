import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * One line of the price list. `netCents` and `grossCents` must always agree
 * (`grossCents === grossOf(netCents)`), yet a re-price writes them one after the other: between
 * the two writes the row is torn, which is what the price lock keeps readers from seeing.
 * `revision` counts re-prices; `fence` is the fencing token of the last re-price's lock.
 */
@Entity({ name: 'price' })
export class Price {
  /** The product priced. */
  @PrimaryColumn({ type: 'varchar', length: 64 })
  sku!: string;

  /** Price before tax, in cents. */
  @Column({ name: 'net_cents', type: 'integer' })
  netCents!: number;

  /** Price with tax, in cents: `grossOf(netCents)` whenever no re-price is half done. */
  @Column({ name: 'gross_cents', type: 'integer' })
  grossCents!: number;

  /** Re-prices since the price was set. */
  @Column({ type: 'integer', default: 0 })
  revision!: number;

  /** Fence of the last re-price's exclusive lock. */
  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  fence!: number;
}

/** Tax rate of the sample shop, in percent. */
const TAX_PERCENT = 20;

/** The gross price of a net price: what `grossCents` must hold for a given `netCents`. */
export function grossOf(netCents: number): number {
  return Math.round((netCents * (100 + TAX_PERCENT)) / 100);
}
