import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * One slice of a segmented product's stock. Each segment has its own lock key
 * (`stock:{sku}:{segment}`) and its own fence, so orders on different segments of one SKU
 * proceed in parallel.
 */
@Entity({ name: 'stock_segment' })
export class StockSegment {
  /** The product. */
  @PrimaryColumn({ type: 'varchar', length: 64 })
  sku!: string;

  /** 0-based segment number. */
  @PrimaryColumn({ type: 'integer' })
  segment!: number;

  /** Units on hand in this segment. */
  @Column({ type: 'integer' })
  stock!: number;

  /** Fence of the last locked write to this segment. */
  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  fence!: number;
}
