import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import type { DeductMode } from './app-config';
import { AtomicWriter, type SqlStep } from './atomic-writer';
import { OrderEntry } from './order.entity';
import { Product } from './product.entity';
import { StockSegment } from './stock-segment.entity';

/** An order about to be recorded in the ledger. */
export interface NewOrder {
  id: string;
  sku: string;
  qty: number;
  segment: number | null;
  fence: number | null;
  mode: DeductMode;
}

/** Orders recorded for one SKU. */
export interface LedgerTotals {
  orders: number;
  units: number;
}

/**
 * Persistence of products, stock segments and the order ledger. Reads go through TypeORM
 * repositories; every write is one guarded statement plus, for an order, its ledger row, in
 * one transaction (see AtomicWriter). The guards are the point of the app: `fence < ?` refuses
 * a write from a lock holder that has been overtaken, `version = ?` refuses a stale optimistic
 * write, and `stock >= ?` never lets stock go negative.
 */
@Injectable()
export class InventoryStore {
  /** Which app process wrote an order (`host/pid`). */
  readonly instance = `${hostname()}/${process.pid}`.slice(0, 64);
  private readonly writer: AtomicWriter;
  private readonly products: Repository<Product>;
  private readonly segmentRows: Repository<StockSegment>;
  private readonly ledger: Repository<OrderEntry>;
  /** Table names as created (with TABLE_PREFIX), for the hand-written SQL. */
  private readonly table: { product: string; segment: string; ledger: string };

  constructor(dataSource: DataSource) {
    this.writer = new AtomicWriter(dataSource);
    this.products = dataSource.getRepository(Product);
    this.segmentRows = dataSource.getRepository(StockSegment);
    this.ledger = dataSource.getRepository(OrderEntry);
    this.table = {
      product: dataSource.getMetadata(Product).tableName,
      segment: dataSource.getMetadata(StockSegment).tableName,
      ledger: dataSource.getMetadata(OrderEntry).tableName,
    };
  }

  /** A ledger entry for an order about to be written. */
  newOrder(fields: Omit<NewOrder, 'id'>): NewOrder {
    return { id: randomUUID(), ...fields };
  }

  findProduct(sku: string): Promise<Product | null> {
    return this.products.findOneBy({ sku });
  }

  findSegment(sku: string, segment: number): Promise<StockSegment | null> {
    return this.segmentRows.findOneBy({ sku, segment });
  }

  findSegments(sku: string): Promise<StockSegment[]> {
    return this.segmentRows.find({ where: { sku }, order: { segment: 'ASC' } });
  }

  /** Units on hand: the product's stock, or the sum of its segments. */
  async available(product: Product): Promise<number> {
    if (product.segments <= 1) return product.stock;
    const segments = await this.findSegments(product.sku);
    return segments.reduce((sum, row) => sum + row.stock, 0);
  }

  async ledgerTotals(sku: string): Promise<LedgerTotals> {
    const row = await this.ledger
      .createQueryBuilder('o')
      .select('COUNT(*)', 'orders')
      .addSelect('COALESCE(SUM(o.qty), 0)', 'units')
      .where('o.sku = :sku', { sku })
      .getRawOne<{ orders: string | number; units: string | number }>();
    return { orders: Number(row?.orders ?? 0), units: Number(row?.units ?? 0) };
  }

  /**
   * Creates or resets a product: `stock` units, split over `segments` rows when above 1, fence
   * and version back to 0, its ledger emptied. An administrative reset, not for use under load.
   */
  reset(sku: string, stock: number, segments: number): Promise<boolean> {
    const { product, segment, ledger } = this.table;
    const steps: SqlStep[] = [
      { sql: `DELETE FROM ${ledger} WHERE sku = ?`, params: [sku] },
      { sql: `DELETE FROM ${segment} WHERE sku = ?`, params: [sku] },
      { sql: `DELETE FROM ${product} WHERE sku = ?`, params: [sku] },
      {
        sql: `INSERT INTO ${product} (sku, stock, fence, version, segments, initial_stock, restocked) VALUES (?, ?, 0, 0, ?, ?, 0)`,
        params: [sku, segments > 1 ? 0 : stock, segments, stock],
      },
    ];
    if (segments > 1) {
      splitEvenly(stock, segments).forEach((units, index) =>
        steps.push({
          sql: `INSERT INTO ${segment} (sku, segment, stock, fence) VALUES (?, ?, ?, 0)`,
          params: [sku, index, units],
        }),
      );
    }
    return this.writer.write(steps);
  }

  /** Locked deduction: refused if a newer lock holder has written, or stock is short. */
  fencedDeduct(order: NewOrder, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = stock - ?, fence = ? WHERE sku = ? AND fence < ? AND stock >= ?`,
        params: [order.qty, fence, order.sku, fence, order.qty],
        mustChangeOneRow: true,
      },
      this.insertOrder(order),
    ]);
  }

  /** Locked restock: refused if a newer lock holder has written. */
  fencedRestock(sku: string, qty: number, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = stock + ?, restocked = restocked + ?, fence = ? WHERE sku = ? AND fence < ?`,
        params: [qty, qty, fence, sku, fence],
        mustChangeOneRow: true,
      },
    ]);
  }

  /** Locked deduction from one segment, under that segment's lock and fence. */
  fencedSegmentDeduct(order: NewOrder & { segment: number }, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.segment} SET stock = stock - ?, fence = ? WHERE sku = ? AND segment = ? AND fence < ? AND stock >= ?`,
        params: [order.qty, fence, order.sku, order.segment, fence, order.qty],
        mustChangeOneRow: true,
      },
      this.insertOrder(order),
    ]);
  }

  /** Locked restock of one segment. */
  fencedSegmentRestock(sku: string, segment: number, qty: number, fence: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.segment} SET stock = stock + ?, fence = ? WHERE sku = ? AND segment = ? AND fence < ?`,
        params: [qty, fence, sku, segment, fence],
        mustChangeOneRow: true,
      },
      {
        sql: `UPDATE ${this.table.product} SET restocked = restocked + ? WHERE sku = ?`,
        params: [qty, sku],
        mustChangeOneRow: true,
      },
    ]);
  }

  /**
   * Unprotected write-back of a stock value computed from an earlier read: the lost-update
   * bug that DEDUCT_MODE=none exists to show. Never use this pattern for real.
   */
  async overwriteStock(order: NewOrder, stock: number): Promise<void> {
    await this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = ? WHERE sku = ?`,
        params: [stock, order.sku],
      },
      this.insertOrder(order),
    ]);
  }

  /** Unlocked restock: one atomic increment needs no lock. */
  addStock(sku: string, qty: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = stock + ?, restocked = restocked + ? WHERE sku = ?`,
        params: [qty, qty, sku],
        mustChangeOneRow: true,
      },
    ]);
  }

  /** Optimistic deduction: applies only if nobody wrote since `version` was read. */
  casDeduct(order: NewOrder, version: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = stock - ?, version = version + 1 WHERE sku = ? AND version = ? AND stock >= ?`,
        params: [order.qty, order.sku, version, order.qty],
        mustChangeOneRow: true,
      },
      this.insertOrder(order),
    ]);
  }

  /** Optimistic restock: applies only if nobody wrote since `version` was read. */
  casRestock(sku: string, qty: number, version: number): Promise<boolean> {
    return this.writer.write([
      {
        sql: `UPDATE ${this.table.product} SET stock = stock + ?, restocked = restocked + ?, version = version + 1 WHERE sku = ? AND version = ?`,
        params: [qty, qty, sku, version],
        mustChangeOneRow: true,
      },
    ]);
  }

  private insertOrder(order: NewOrder): SqlStep {
    return {
      sql: `INSERT INTO ${this.table.ledger} (id, sku, qty, segment, fence, mode, instance) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      params: [
        order.id,
        order.sku,
        order.qty,
        order.segment,
        order.fence,
        order.mode,
        this.instance,
      ],
    };
  }
}

/** `total` split into `parts` integers differing by at most one, larger ones first. */
export function splitEvenly(total: number, parts: number): number[] {
  const base = Math.floor(total / parts);
  return Array.from({ length: parts }, (_, i) => base + (i < total % parts ? 1 : 0));
}
