import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { AtomicWriter } from './atomic-writer';
import { grossOf, Price } from './price.entity';

/**
 * Persistence of the price list. A re-price is deliberately two statements (net, then gross),
 * as a job rewriting a price list in steps would be; each carries the re-price's fence, so a
 * re-pricer whose lock was taken over cannot write over a newer one.
 */
@Injectable()
export class PriceStore {
  private readonly writer: AtomicWriter;
  private readonly prices: Repository<Price>;
  /** Table name as created (with TABLE_PREFIX), for the hand-written SQL. */
  private readonly table: string;

  constructor(dataSource: DataSource) {
    this.writer = new AtomicWriter(dataSource);
    this.prices = dataSource.getRepository(Price);
    this.table = dataSource.getMetadata(Price).tableName;
  }

  /** The SKU's price line, or `null`. */
  find(sku: string): Promise<Price | null> {
    return this.prices.findOneBy({ sku });
  }

  /**
   * Creates or resets a price line, consistent, revision and fence back to 0. An administrative
   * reset, not for use while re-prices of the SKU run.
   */
  reset(sku: string, netCents: number): Promise<boolean> {
    return this.writer.write([
      { sql: `DELETE FROM ${this.table} WHERE sku = ?`, params: [sku] },
      {
        sql: `INSERT INTO ${this.table} (sku, net_cents, gross_cents, revision, fence) VALUES (?, ?, ?, 0, 0)`,
        params: [sku, netCents, grossOf(netCents)],
      },
    ]);
  }

  /** A re-price's first step: the new net price (the row is torn until `writeGross`). */
  writeNet(sku: string, netCents: number, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table} SET net_cents = ?, revision = revision + 1, fence = ? WHERE sku = ? AND fence < ?`,
        params: [netCents, fence, sku, fence],
        mustChangeOneRow: true,
      },
    ]);
  }

  /** A re-price's second step: the gross price, only if no newer re-price has started since. */
  writeGross(sku: string, grossCents: number, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table} SET gross_cents = ? WHERE sku = ? AND fence = ?`,
        params: [grossCents, sku, fence],
        mustChangeOneRow: true,
      },
    ]);
  }
}
