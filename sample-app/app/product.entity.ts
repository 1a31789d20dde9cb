import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * A product and its stock. Unsegmented (`segments` = 1), `stock` is the stock; segmented, the
 * stock lives in `stock_segment` rows and `stock` here stays 0. `fence` is the fencing token
 * of the last locked write: a write carrying a lower one comes from a lock holder that was
 * overtaken, and is refused. `version` is bumped by every optimistic (CAS) write.
 */
@Entity({ name: 'product' })
export class Product {
  /** Stock keeping unit, the product's id. */
  @PrimaryColumn({ type: 'varchar', length: 64 })
  sku!: string;

  /** Units on hand (unsegmented products). */
  @Column({ type: 'integer' })
  stock!: number;

  /** Fence of the last locked write. */
  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  fence!: number;

  /** Bumped by every optimistic write (compare-and-set). */
  @Column({ type: 'integer', default: 0 })
  version!: number;

  /** Number of `stock_segment` rows holding the stock; 1 = unsegmented. */
  @Column({ type: 'integer', default: 1 })
  segments!: number;

  /** Stock set by the last reset (PUT), the baseline of the consistency check. */
  @Column({ name: 'initial_stock', type: 'integer' })
  initialStock!: number;

  /** Units added by restocks since the last reset. */
  @Column({ type: 'integer', default: 0 })
  restocked!: number;
}
