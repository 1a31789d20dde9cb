/**
 * A first look, with no servers: 200 concurrent orders race for 50 units of one SKU.
 * Without a lock, read-modify-write races oversell; under `@Locked('stock:{0}')` none do.
 * (Runs on the in-process `memory` backend; the full multi-process inventory app arrives
 * with its own issue.)
 *
 * Run: npm run demo
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, LockModule } from '../lib/index';

const ORDERS = 200;
const STOCK = 50;
const pause = () => new Promise<void>((r) => setTimeout(r, Math.random() * 3));

@Injectable()
class Inventory {
  stock = new Map<string, number>();
  sold = 0;

  reset(sku: string): void {
    this.stock.set(sku, STOCK);
    this.sold = 0;
  }

  /** Check-then-act with an await in between: the classic oversell. */
  async deductUnlocked(sku: string): Promise<boolean> {
    const left = this.stock.get(sku)!;
    await pause(); // a database round trip would sit here
    if (left < 1) return false;
    this.stock.set(sku, left - 1);
    this.sold++;
    return true;
  }

  @Locked('stock:{0}', { waitTimeout: 30_000 })
  async deductLocked(sku: string): Promise<boolean> {
    return this.deductUnlocked(sku);
  }
}

@Module({
  imports: [LockModule.forRoot({ backends: { local: { type: 'memory' } } })],
  providers: [Inventory],
})
class DemoModule {}

async function race(
  inventory: Inventory,
  deduct: (sku: string) => Promise<boolean>,
): Promise<number> {
  inventory.reset('sku-1');
  await Promise.all(Array.from({ length: ORDERS }, () => deduct('sku-1')));
  return inventory.sold - STOCK; // oversold units
}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(DemoModule, { logger: ['error', 'warn'] });
  const inventory = app.get(Inventory);
  const unlocked = await race(inventory, (sku) => inventory.deductUnlocked(sku));
  const locked = await race(inventory, (sku) => inventory.deductLocked(sku));
  await app.close();
  console.log(`${ORDERS} concurrent orders for ${STOCK} units`);
  console.log(`  without a lock : oversold ${Math.max(0, unlocked)}`);
  console.log(`  @Locked        : oversold ${Math.max(0, locked)}`);
  console.log(
    locked <= 0
      ? 'verdict: the lock held, nothing oversold'
      : 'verdict: OVERSOLD under the lock (bug!)',
  );
  process.exitCode = locked <= 0 ? 0 : 1;
}

void main();
