/**
 * The testing kit as a user's own tests use it: `Test.createTestingModule` with
 * `LockTestingModule.forRoot(<the app's LockModule options>)` and a service with `@Locked` and
 * `@LeaderOnly`; no store, no server. Each helper stages what another instance or the store
 * would do, and the code under test reacts as it would in production. Also under Jest's fake
 * timers.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Locked } from '../../lib/decorators/locked.decorator';
import {
  LockBackendError,
  LockLostError,
  LockNotAcquiredError,
} from '../../lib/errors/lock.errors';
import { LeaderOnly } from '../../lib/leader/leader-only.decorator';
import { LeaderService } from '../../lib/leader/leader.service';
import { LockService } from '../../lib/lock.service';
import { LockTesting, LockTestingModule } from '../../lib/testing';

@Injectable()
class Inventory {
  stock = new Map<string, number>([['sku-1', 5]]);
  lost?: unknown;

  @Locked('stock:{0}', { waitTimeout: 0 })
  async deduct(sku: string, qty: number): Promise<number> {
    LockTesting.assertLocked(`stock:${sku}`);
    const left = (this.stock.get(sku) ?? 0) - qty;
    this.stock.set(sku, left);
    return left;
  }

  @Locked('stock:{0}')
  async recount(sku: string, work: Promise<void>, locks: LockService): Promise<void> {
    const lock = locks.current()!;
    lock.signal.addEventListener('abort', () => (this.lost = lock.signal.reason));
    await work;
  }

  @LeaderOnly('reports')
  async report(): Promise<string> {
    return 'report';
  }

  unlockedWrite(): void {
    LockTesting.assertLocked('stock:sku-1');
  }
}

/** What the application module would pass to LockModule.forRoot. */
const APP_LOCK_OPTIONS = {
  backends: { main: { type: 'redis', url: 'redis://prod:6379' } },
  keyPrefix: 'app:',
} as const;

let moduleRef: TestingModule | undefined;
afterEach(async () => {
  jest.useRealTimers();
  await moduleRef?.close();
  moduleRef = undefined;
});

async function setUp() {
  moduleRef = await Test.createTestingModule({
    imports: [LockTestingModule.forRoot(APP_LOCK_OPTIONS)],
    providers: [Inventory],
  }).compile();
  await moduleRef.init();
  return {
    inventory: moduleRef.get(Inventory),
    testing: moduleRef.get(LockTesting),
    locks: moduleRef.get(LockService),
    leaders: moduleRef.get(LeaderService),
  };
}

describe('LockTesting in a user test', () => {
  it('runs @Locked code on memory under the app’s own options, and records what happened', async () => {
    const { inventory, testing, locks } = await setUp();
    expect(await inventory.deduct('sku-1', 2)).toBe(3);
    expect(testing.history('stock:sku-1').map((e) => e.event)).toEqual(['acquired', 'released']);
    expect(testing.history('stock:sku-1')[0].fence).toBeGreaterThan(0);
    expect(await locks.isLocked('stock:sku-1')).toBe(false);
  });

  it('holdElsewhere: the key is busy until freed', async () => {
    const { inventory, testing } = await setUp();
    const free = await testing.holdElsewhere('stock:sku-1');
    await expect(inventory.deduct('sku-1', 1)).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(inventory.stock.get('sku-1')).toBe(5);
    expect(testing.history('stock:sku-1').map((e) => e.event)).toEqual(['busy']);
    await free();
    expect(await inventory.deduct('sku-1', 1)).toBe(4);
  });

  it('loseLock: the holder’s signal aborts with LockLostError', async () => {
    const { inventory, testing, locks } = await setUp();
    let finish!: () => void;
    const work = new Promise<void>((resolve) => (finish = resolve));
    const running = inventory.recount('sku-1', work, locks);
    await new Promise((r) => setImmediate(r));
    expect(testing.loseLock('stock:sku-1')).toBe(1);
    expect(inventory.lost).toBeInstanceOf(LockLostError);
    finish();
    await running;
    expect(testing.history('stock:sku-1').map((e) => e.event)).toContain('lost');
  });

  it('failNext: the next acquisition fails with LockBackendError, the one after works', async () => {
    const { inventory, testing } = await setUp();
    testing.failNext('stock:sku-1');
    await expect(inventory.deduct('sku-1', 1)).rejects.toBeInstanceOf(LockBackendError);
    expect(inventory.stock.get('sku-1')).toBe(5);
    expect(await inventory.deduct('sku-1', 1)).toBe(4);
    expect(testing.history('stock:sku-1').map((e) => e.event)).toEqual([
      'failed',
      'acquired',
      'released',
    ]);
  });

  it('assertLocked: throws for code that runs without its lock', async () => {
    const { inventory } = await setUp();
    expect(() => inventory.unlockedWrite()).toThrow(/stock:sku-1/);
    expect(() => LockTesting.assertLocked()).toThrow(/no lock is held/);
  });

  it('leadElsewhere: @LeaderOnly stops running here, and runs again once freed', async () => {
    const { inventory, testing, leaders } = await setUp();
    for (let i = 0; i < 50 && (await inventory.report()) === undefined; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await inventory.report()).toBe('report');
    const stop = await testing.leadElsewhere('reports', { id: 'node-2' });
    expect(await inventory.report()).toBeUndefined();
    expect(await leaders.leader('reports')).toMatchObject({ id: 'node-2' });
    await stop();
    for (let i = 0; i < 50 && (await inventory.report()) === undefined; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await inventory.report()).toBe('report');
  });

  it('works with Jest fake timers: a lock is renewed as fake time passes', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate'] });
    const { testing, locks } = await setUp();
    let renewals = 0;
    locks.on('renewed', () => renewals++);
    const lock = await locks.acquire('job', { ttl: 1_000 });
    const unrenewed = await locks.acquire('once', { ttl: 1_000, autoRenew: false });
    await jest.advanceTimersByTimeAsync(5_000);
    // Renewed every third of the ttl on the fake clock; the other ran out on it.
    expect(lock.isHeld()).toBe(true);
    expect(renewals).toBeGreaterThanOrEqual(12);
    expect(unrenewed.isHeld()).toBe(false);
    expect(unrenewed.signal.reason).toBeInstanceOf(LockLostError);
    await lock.release();
    expect(testing.history('job').map((e) => e.event)).toEqual(['acquired', 'released']);
    expect(testing.history('once').map((e) => e.event)).toEqual(['acquired', 'lost']);
  });
});
