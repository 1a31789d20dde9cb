import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Inject, Injectable, Param, SetMetadata } from '@nestjs/common';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import {
  Locked,
  LockConfigError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type Lock,
} from '../../lib/index';
import { createLockApp, type LockTestApp } from '../support/lock-app';

const PREFIX = 'dec:';
const tick = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Records how many calls run at once per key, to prove serialization. */
class Concurrency {
  private readonly active = new Map<string, number>();
  readonly max = new Map<string, number>();
  enter(key: string): void {
    const n = (this.active.get(key) ?? 0) + 1;
    this.active.set(key, n);
    this.max.set(key, Math.max(this.max.get(key) ?? 0, n));
  }
  leave(key: string): void {
    this.active.set(key, (this.active.get(key) ?? 1) - 1);
  }
}

const CUSTOM = 'custom:meta';

@Injectable()
class InventoryService {
  readonly conc = new Concurrency();
  stock = new Map<string, number>([
    ['a', 100],
    ['b', 100],
  ]);
  calls = 0;

  constructor(readonly locks: LockService) {}

  /** Read, yield, write: loses updates unless serialized. */
  @Locked('stock:{0}')
  async deduct(sku: string, qty: number): Promise<number> {
    this.calls++;
    this.conc.enter(sku);
    const before = this.stock.get(sku) ?? 0;
    await tick(5);
    this.stock.set(sku, before - qty);
    this.conc.leave(sku);
    return before - qty;
  }

  @Locked('order:{0.customer.id}:{0.id}')
  async byPath(_order: { id: number; customer: { id: string } }): Promise<string | undefined> {
    return this.locks.current()?.key;
  }

  @Locked((a: string, b: string) => [`acct:${b}`, `acct:${a}`])
  async transfer(_a: string, _b: string): Promise<readonly string[]> {
    return this.locks.current()!.keys;
  }

  @Locked('outer:{0}')
  async outer(id: string): Promise<[string, string, boolean]> {
    const mine = this.locks.current()!;
    const inner = await this.inner(id);
    return [mine.token, inner, mine.isHeld()];
  }

  @Locked('outer:{0}', { waitTimeout: 0 })
  async inner(_id: string): Promise<string> {
    return this.locks.current()!.token;
  }

  @Locked('boom')
  async fails(err: Error): Promise<never> {
    throw err;
  }

  @Locked('busy-inside', { onBusy: 'skip' })
  async throwsNotAcquired(err: LockNotAcquiredError): Promise<never> {
    throw err;
  }

  @SetMetadata(CUSTOM, 'kept')
  @Locked('meta')
  async decoratedBelow(): Promise<string> {
    return 'ok';
  }

  @Locked('meta2')
  @SetMetadata(CUSTOM, 'kept-too')
  async decoratedAbove(): Promise<string> {
    return 'ok';
  }

  @Locked('sync:{0}')
  syncMethod(x: number): number {
    return x * 2;
  }

  @Locked('watch', { ttl: 300 })
  async watchLoss(onHeld: (lock: Lock) => void): Promise<unknown> {
    const lock = this.locks.current()!;
    onHeld(lock);
    return new Promise((resolve) =>
      lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)),
    );
  }
}

describe('@Locked on a service method', () => {
  let t: LockTestApp;
  let svc: InventoryService;

  beforeAll(async () => {
    t = await createLockApp(
      {
        backends: { mem: { type: 'memory' } },
        keyPrefix: PREFIX,
        defaults: { waitTimeout: 5_000 },
      },
      { providers: [InventoryService] },
    );
    svc = t.app.get(InventoryService);
  });
  afterAll(() => t.close());

  it('serializes concurrent calls on one key and keeps different keys parallel', async () => {
    const runs = Array.from({ length: 10 }, (_, i) => svc.deduct(i % 2 ? 'a' : 'b', 1));
    await Promise.all(runs);
    expect(svc.stock.get('a')).toBe(95);
    expect(svc.stock.get('b')).toBe(95);
    expect(svc.conc.max.get('a')).toBe(1);
    expect(svc.conc.max.get('b')).toBe(1);
  });

  it('8 independent calls started together do not share a lock (no accidental re-entry)', async () => {
    const metricsBefore = t.locks.getMetrics().mem.lock_reentered_total;
    const before = svc.stock.get('a')!;
    await Promise.all(Array.from({ length: 8 }, () => svc.deduct('a', 1)));
    expect(svc.stock.get('a')).toBe(before - 8);
    expect(svc.conc.max.get('a')).toBe(1);
    expect(t.locks.getMetrics().mem.lock_reentered_total).toBe(metricsBefore);
  });

  it('reads nested argument paths in key templates', async () => {
    await expect(svc.byPath({ id: 7, customer: { id: 'c1' } })).resolves.toBe('order:c1:7');
  });

  it('takes every key of a key function returning an array, in canonical order', async () => {
    await expect(svc.transfer('x', 'y')).resolves.toEqual(['acct:x', 'acct:y']);
  });

  it('re-enters a key held by the calling @Locked method without a backend call', async () => {
    const reentered = t.locks.getMetrics().mem.lock_reentered_total;
    const [outerToken, innerToken, stillHeld] = await svc.outer('1');
    expect(innerToken).toBe(outerToken);
    expect(stillHeld).toBe(true);
    expect(t.locks.getMetrics().mem.lock_reentered_total).toBe(reentered + 1);
    await expect(t.locks.isLocked('outer:1')).resolves.toBe(false);
  });

  it('rethrows the method’s own error as the same object and releases the lock', async () => {
    const err = new TypeError('user failure');
    const caught = await svc.fails(err).catch((e: unknown) => e);
    expect(caught).toBe(err);
    await expect(t.locks.isLocked('boom')).resolves.toBe(false);
  });

  it('onBusy "skip" never swallows a LockNotAcquiredError thrown by the method itself', async () => {
    const own = new LockNotAcquiredError('elsewhere', 'mem', 0);
    await expect(svc.throwsNotAcquired(own)).rejects.toBe(own);
  });

  it('rejects keys that do not resolve, before running the method', async () => {
    const calls = svc.calls;
    await expect(svc.deduct(undefined as unknown as string, 1)).rejects.toMatchObject({
      code: 'LOCK_CONFIG',
      field: 'key',
      where: '@Locked on InventoryService.deduct',
      message: expect.stringMatching(/placeholder \{0\} in "stock:\{0\}" resolved to undefined/),
    });
    await expect(svc.deduct({} as unknown as string, 1)).rejects.toBeInstanceOf(LockConfigError);
    await expect(svc.deduct('', 1)).rejects.toBeInstanceOf(LockConfigError);
    await expect(svc.byPath({ id: 1 } as never)).rejects.toBeInstanceOf(LockConfigError);
    await expect(svc.deduct('x'.repeat(20_000), 1)).rejects.toBeInstanceOf(LockConfigError);
    expect(svc.calls).toBe(calls);
  });

  it('keeps metadata and name of the method whichever side other decorators are on', () => {
    const proto = InventoryService.prototype;
    expect(Reflect.getMetadata(CUSTOM, proto.decoratedBelow)).toBe('kept');
    expect(Reflect.getMetadata(CUSTOM, proto.decoratedAbove)).toBe('kept-too');
    expect(proto.decoratedAbove.name).toBe('decoratedAbove');
    expect(proto.deduct.name).toBe('deduct');
    expect(proto.deduct.length).toBe(2);
  });

  it('locks sync methods too (the result becomes a promise)', async () => {
    await expect(svc.syncMethod(21)).resolves.toBe(42);
  });

  it('aborts the running method’s signal with LockLostError when the lock is lost', async () => {
    let lock: Lock | undefined;
    const lost: string[] = [];
    const off = t.locks.on('lost', (e) => lost.push(e.key));
    const result = svc.watchLoss((l) => (lock = l));
    await tick(10);
    // Someone (an operator, a store failover) deletes the key behind the holder's back.
    await t.manager.getBackend('mem').release(PREFIX + 'watch', lock!.token);
    const reason = await result;
    off();
    expect(reason).toBeInstanceOf(LockLostError);
    expect(lock!.isHeld()).toBe(false);
    expect(lost).toEqual(['watch']);
  });
});

describe('@Locked with mode and permits', () => {
  it('shared methods overlap, an exclusive one runs alone, a counted one at most permits at once', async () => {
    @Injectable()
    class Catalogue {
      readonly conc = new Concurrency();
      slots: number[] = [];
      readers = 0;
      writers = 0;
      /** A writer beside anyone, or a reader beside a writer. */
      overlaps = 0;
      constructor(@Inject(LockService) readonly locks: LockService) {}

      @Locked('catalogue', { mode: 'shared', waitTimeout: 5_000 })
      async read(): Promise<void> {
        if (this.writers > 0) this.overlaps++;
        this.readers++;
        this.conc.enter('read');
        await tick(20);
        this.conc.leave('read');
        this.readers--;
      }

      @Locked('catalogue', { waitTimeout: 5_000 })
      async reprice(): Promise<void> {
        if (this.readers > 0 || this.writers > 0) this.overlaps++;
        this.writers++;
        await tick(5);
        this.writers--;
      }

      @Locked('provider', { permits: 2, waitTimeout: 5_000 })
      async call(): Promise<void> {
        this.slots.push(this.locks.current()!.permit);
        this.conc.enter('call');
        await tick(15);
        this.conc.leave('call');
      }
    }
    const t = await createLockApp(
      { backends: { mem: { type: 'memory' } } },
      { providers: [Catalogue] },
    );
    try {
      const c = t.app.get(Catalogue);
      await Promise.all([c.read(), c.read(), c.read(), c.reprice(), c.read(), c.read()]);
      expect(c.conc.max.get('read')).toBeGreaterThanOrEqual(2);
      expect(c.overlaps).toBe(0);
      await Promise.all(Array.from({ length: 6 }, () => c.call()));
      expect(c.conc.max.get('call')).toBe(2);
      expect(new Set(c.slots)).toEqual(new Set([0, 1]));
    } finally {
      await t.close();
    }
  });
});

describe('@Locked fails closed', () => {
  it('refuses to run when LockModule was never initialised', async () => {
    let ran = false;
    class Lonely {
      @Locked('lonely')
      async work(): Promise<void> {
        ran = true;
      }
    }
    await expect(new Lonely().work()).rejects.toMatchObject({
      code: 'LOCK_CONFIG',
      field: 'LockModule',
    });
    expect(ran).toBe(false);
  });

  it('refuses to run after the application shut down', async () => {
    let ran = 0;
    @Injectable()
    class Job {
      @Locked('job')
      async run(): Promise<void> {
        ran++;
      }
    }
    const t = await createLockApp({ backends: { mem: { type: 'memory' } } }, { providers: [Job] });
    const job = t.app.get(Job);
    await job.run();
    await t.close();
    await expect(job.run()).rejects.toBeInstanceOf(LockConfigError);
    expect(ran).toBe(1);
  });

  it('two applications in one process: each @Locked instance locks through its own module, also after the other closed', async () => {
    @Injectable()
    class Worker {
      constructor(@Inject(LockService) private readonly locks: LockService) {}
      @Locked('shared-job')
      async run(): Promise<string | undefined> {
        // The lock this app's own service sees in this scope, if the decorator used it.
        return this.locks.current()?.backend;
      }
    }
    const a = await createLockApp({ backends: { a: { type: 'memory' } } }, { providers: [Worker] });
    const b = await createLockApp({ backends: { b: { type: 'memory' } } }, { providers: [Worker] });
    try {
      expect(await a.app.get(Worker).run()).toBe('a');
      expect(await b.app.get(Worker).run()).toBe('b');
      await b.close();
      expect(await a.app.get(Worker).run()).toBe('a');
      await expect(b.app.get(Worker).run()).rejects.toMatchObject({ field: 'LockModule' });
    } finally {
      await a.close();
      await b.close();
    }
    await expect(a.app.get(Worker).run()).rejects.toMatchObject({ field: 'LockModule' });
  });

  it('rejects bad decorator options when the class is defined, naming the method', () => {
    const define = (key: unknown, options: unknown) => () => {
      class Orders {
        @Locked(key as never, options as never)
        pay(): void {}
      }
      return Orders;
    };
    const cases: Array<[unknown, unknown, string]> = [
      ['k', { onBusy: 'later' }, 'onBusy'],
      [42, {}, 'key'],
      ['k', { ttl: 0 }, 'ttl'],
      ['k', { ttl: 50 }, 'ttl'],
      ['k', { waitTimeout: -1 }, 'waitTimeout'],
      ['k', { timeout: 5 }, 'options.timeout'],
      ['k', { signal: new AbortController().signal }, 'signal'],
      ['k', { mode: 'read' }, 'mode'],
      ['k', { permits: 0 }, 'permits'],
      ['k', { permits: 2.5 }, 'permits'],
      ['k', { mode: 'shared', permits: 4 }, 'permits'],
    ];
    for (const [key, options, field] of cases) {
      expect(define(key, options)).toThrow(
        expect.objectContaining({
          constructor: LockConfigError,
          field,
          where: '@Locked on Orders.pay',
          message: expect.stringContaining('in @Locked on Orders.pay: '),
        }),
      );
    }
  });

  it('without a LockModule, says which method and how to fix it', async () => {
    class Payments {
      @Locked('order:{0}')
      async pay(_orderId: string): Promise<void> {}
    }
    const err = await new Payments().pay('o-1').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'LOCK_CONFIG', where: '@Locked on Payments.pay' });
    expect(String((err as Error).message)).toMatch(/import LockModule\.forRoot\(/);
  });
});

@Controller('inventory')
class InventoryController {
  started = 0;
  release?: () => void;

  @Get(':sku/hold')
  @Locked('route:{0}')
  async hold(@Param('sku') sku: string): Promise<{ sku: string; fence: number | null }> {
    this.started++;
    await new Promise<void>((resolve) => (this.release = resolve));
    return { sku, fence: null };
  }

  @Locked('route:{0}', { waitTimeout: 0 })
  @Get(':sku/try')
  async tryIt(@Param('sku') sku: string): Promise<{ sku: string }> {
    return { sku };
  }
}

describe.each([
  { status: undefined, expected: 409 },
  { status: 423, expected: 423 },
])('@Locked on a controller route (notAcquiredHttpStatus=$status)', ({ status, expected }) => {
  let t: LockTestApp;
  let base: string;

  beforeAll(async () => {
    t = await createLockApp(
      {
        backends: { mem: { type: 'memory' } },
        ...(status ? { notAcquiredHttpStatus: status } : {}),
      },
      { controllers: [InventoryController] },
    );
    await t.app.listen(0, '127.0.0.1');
    const addr = t.app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${addr.port}/inventory`;
  });
  afterAll(() => t.close());

  it(`answers ${expected} (not 500) while another request holds the lock, 200 after`, async () => {
    const ctrl = t.app.get(InventoryController);
    const holding = fetch(`${base}/sku1/hold`);
    while (ctrl.started === 0) await tick(5);

    const busy = await fetch(`${base}/sku1/try`);
    expect(busy.status).toBe(expected);
    expect(await busy.json()).toMatchObject({ statusCode: expected, code: 'LOCK_NOT_ACQUIRED' });

    const other = await fetch(`${base}/sku2/try`);
    expect(other.status).toBe(200);
    expect(await other.json()).toEqual({ sku: 'sku2' });

    ctrl.release!();
    expect((await holding).status).toBe(200);
    const after = await fetch(`${base}/sku1/try`);
    expect(after.status).toBe(200);
  });
});

@Injectable()
class ReportJob {
  runs = 0;

  @Cron('* * * * * *')
  @Locked('report-job', { onBusy: 'skip' })
  async buildReport(): Promise<void> {
    this.runs++;
  }
}

describe('@Locked on a @Cron method with onBusy "skip"', () => {
  let t: LockTestApp;
  beforeAll(async () => {
    t = await createLockApp(
      { backends: { mem: { type: 'memory' } } },
      { imports: [ScheduleModule.forRoot()], providers: [ReportJob] },
    );
  });
  afterAll(() => t.close());

  it('skips ticks while another holder has the lock, runs once it is free', async () => {
    const job = t.app.get(ReportJob);
    const contended: string[] = [];
    const off = t.locks.on('contended', (e) => contended.push(e.key));
    // Another replica is building the report.
    const other = await t.locks.acquire('report-job');
    const runsBefore = job.runs;
    await tick(2_300); // at least two cron ticks
    expect(job.runs).toBe(runsBefore);
    expect(contended.filter((k) => k === 'report-job').length).toBeGreaterThanOrEqual(2);
    await other.release();
    const deadline = Date.now() + 3_000;
    while (job.runs === runsBefore && Date.now() < deadline) await tick(50);
    off();
    expect(job.runs).toBeGreaterThan(runsBefore);
  });
});
