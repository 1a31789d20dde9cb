import { afterEach, describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../../backends/memory/memory.backend';
import { LockBackendError, LockConfigError } from '../../errors/lock.errors';
import type { LockEvent } from '../../lock.interfaces';
import type {
  GrantRequest,
  LockBackendCapabilities,
  LockGrant,
  QueuedRequest,
} from '../contract/lock-backend';
import type { LockSettings } from '../settings/module-options';
import { LockEngine } from './lock-engine';

// How the acquisition loop reads a backend's capabilities: `fencing` (a fence or null, and a
// fencing backend's grant without one refused) and `waiting` (poll, queue, queue-first). Every
// backend shipped fences, so the conformance battery cannot show the `fencing: false` path.

/** The real memory store, declaring `capabilities` and handing out `fence` instead of its own. */
class DeclaredMemory extends MemoryLockBackend {
  calls = { tryAcquire: 0, acquire: 0 };
  constructor(
    override readonly capabilities: LockBackendCapabilities,
    private readonly fenceOf: (real: number | null) => unknown = (real) => real,
  ) {
    super();
  }
  override async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    this.calls.tryAcquire++;
    return this.withFence(await super.tryAcquire(request));
  }
  override async acquire(request: QueuedRequest): Promise<LockGrant | null> {
    this.calls.acquire++;
    return this.withFence(await super.acquire(request));
  }
  private withFence(grant: LockGrant | null): LockGrant | null {
    return grant && ({ ...grant, fence: this.fenceOf(grant.fence) } as LockGrant);
  }
}

const caps = (c: Partial<LockBackendCapabilities>): LockBackendCapabilities => ({
  leaseBased: true,
  fencing: true,
  waiting: 'queue',
  ...c,
});

class Silent extends Logger {
  override log(): void {}
  override warn(): void {}
  override error(): void {}
}
const engines: LockEngine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** Settings of the engines under test: backend `m` by default, keys prefixed `p:`. */
const SETTINGS: LockSettings = {
  defaultBackend: 'm',
  keyPrefix: 'p:',
  ttl: 5_000,
  waitTimeout: 0,
  autoRenew: true,
  shutdown: { inFlight: 'abort', timeout: 1_000 },
  operationTimeout: 1_000,
};

/** An engine over `backend` alone (named `m`), recording its events. */
function engineOver(backend: DeclaredMemory) {
  const engine = new LockEngine(new Map([['m', backend]]), SETTINGS, new Silent('test'));
  engines.push(engine);
  const events: LockEvent[] = [];
  for (const type of ['acquired', 'released', 'error'] as const) {
    engine.on(type, (e) => events.push(e));
  }
  return { engine, events };
}

describe('Acquisition and capabilities.fencing', () => {
  it('a backend without fencing: locks, re-entries, queued grants and events carry fence null', async () => {
    const backend = new DeclaredMemory(caps({ fencing: false }), () => null);
    const { engine, events } = engineOver(backend);
    const lock = await engine.acquire(['b', 'a'], undefined, 'wait');
    expect(lock.fence).toBeNull();
    expect(lock.fences).toEqual([null, null]);
    const reentry = await engine.runInScope(lock, () => engine.acquire('a', undefined, 'wait'));
    expect(reentry.fence).toBeNull();
    await reentry.release();
    // a waiter granted through the store's queue
    const waiter = engine.acquire('a', { waitTimeout: 5_000 }, 'wait');
    await lock.release();
    const queued = await waiter;
    expect(backend.calls.acquire).toBe(1);
    expect(queued.fence).toBeNull();
    await queued.release();
    // (a waiter's grant may be reported between the two releases: order is not the point)
    expect(events.map((e) => `${e.type} ${e.key}`).sort()).toEqual([
      'acquired a',
      'acquired a',
      'acquired b',
      'released a',
      'released a',
      'released b',
    ]);
    expect(events.map((e) => e.fence)).toEqual(Array(6).fill(null));
  });

  it('a backend without fencing that returns a number anyway: the fence is still null', async () => {
    const { engine } = engineOver(new DeclaredMemory(caps({ fencing: false })));
    const lock = await engine.acquire('k', undefined, 'try');
    expect(lock?.fence).toBeNull();
    await lock?.release();
  });

  it.each([null, undefined, 1.5, NaN, 2 ** 53, '3'])(
    'a fencing backend granting fence %p is refused with LockBackendError, the grant released',
    async (fence) => {
      const backend = new DeclaredMemory(caps({}), () => fence);
      const { engine, events } = engineOver(backend);
      const err = await engine.acquire('k', undefined, 'wait').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockBackendError);
      expect((err as Error).message).toMatch(/without a valid fencing token/);
      await new Promise((r) => setImmediate(r)); // the release is sent in the background
      expect(await backend.isLocked('p:k')).toBe(false);
      expect(events.filter((e) => e.type === 'acquired')).toEqual([]);
      expect(engine.getMetrics().m.lock_held).toBe(0);
    },
  );

  it("a fencing backend's queued grant without a fence is refused and released too", async () => {
    let bad = false;
    const backend = new DeclaredMemory(caps({}), (real) => (bad ? null : real));
    const { engine } = engineOver(backend);
    const holder = await engine.acquire('k', undefined, 'wait');
    bad = true;
    const waiter = engine.acquire('k', { waitTimeout: 5_000 }, 'wait').catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    await holder.release();
    expect(await waiter).toBeInstanceOf(LockBackendError);
    expect(backend.calls.acquire).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(await backend.isLocked('p:k')).toBe(false);
  });
});

describe('Acquisition and capabilities.waiting', () => {
  /** A contended acquisition of `k` (held, released after 150 ms): the store calls it made. */
  async function contended(waiting: LockBackendCapabilities['waiting']) {
    const backend = new DeclaredMemory(caps({ waiting }));
    const { engine } = engineOver(backend);
    const holder = await engine.acquire('k', undefined, 'wait');
    backend.calls = { tryAcquire: 0, acquire: 0 };
    setTimeout(() => void holder.release(), 150);
    const lock = await engine.acquire('k', { waitTimeout: 5_000 }, 'wait');
    await lock.release();
    return backend.calls;
  }

  it("'poll' retries tryAcquire with backoff and never calls acquire", async () => {
    const calls = await contended('poll');
    expect(calls.acquire).toBe(0);
    expect(calls.tryAcquire).toBeGreaterThanOrEqual(3);
  });

  it("'queue' tries once, then waits in the store's acquire", async () => {
    expect(await contended('queue')).toEqual({ tryAcquire: 1, acquire: 1 });
  });

  it("'queue-first' waits in acquire straight away; a single try still uses tryAcquire", async () => {
    expect(await contended('queue-first')).toEqual({ tryAcquire: 0, acquire: 1 });
    const backend = new DeclaredMemory(caps({ waiting: 'queue-first' }));
    const { engine } = engineOver(backend);
    const lock = await engine.acquire('k', undefined, 'try');
    await lock?.release();
    expect(backend.calls).toEqual({ tryAcquire: 1, acquire: 0 });
  });

  it('a backend declaring a queue without acquire() is refused when the engine is built', () => {
    const backend = new DeclaredMemory(caps({ waiting: 'queue' }));
    Object.defineProperty(backend, 'acquire', { value: undefined });
    expect(() => engineOver(backend)).toThrow(LockConfigError);
  });
});

describe('Acquisition and capabilities.shared / capabilities.permits', () => {
  it('refuses what the backend does not declare with LockConfigError, before any store call', async () => {
    // The memory store can do both; declared without them, the engine must not ask it.
    for (const declared of [caps({}), caps({ shared: false, permits: false })]) {
      const backend = new DeclaredMemory(declared);
      const { engine } = engineOver(backend);
      for (const [options, field] of [
        [{ mode: 'shared' }, 'mode'],
        [{ permits: 2 }, 'permits'],
        [{ mode: 'shared', waitTimeout: 1_000 }, 'mode'],
      ] as const) {
        for (const mode of ['try', 'wait'] as const) {
          const err = await (
            mode === 'try'
              ? engine.acquire(['k', 'j'], options, mode)
              : engine.acquire('k', options, mode)
          ).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(LockConfigError);
          expect(err).toMatchObject({ field });
          expect((err as Error).message).toMatch(/backend "m" cannot grant/);
          expect((err as Error).message).toMatch(/the memory backend can/);
        }
      }
      expect(backend.calls).toEqual({ tryAcquire: 0, acquire: 0 });
      // The default (a mutex) is what it always was.
      const lock = await engine.acquire('k', { mode: 'exclusive', permits: 1 }, 'wait');
      expect(lock).toMatchObject({ mode: 'exclusive', permit: 0 });
      await lock.release();
    }
  });

  it('names the configured backends that can grant it', async () => {
    const engine = new LockEngine(
      new Map([
        ['plain', new DeclaredMemory(caps({}))],
        ['rw', new DeclaredMemory(caps({ shared: true }))],
      ]),
      { ...SETTINGS, defaultBackend: 'plain', keyPrefix: '' },
      new Silent('test'),
    );
    engines.push(engine);
    const err = await engine.acquire('k', { mode: 'shared' }, 'try').catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/backend "plain" cannot grant mode 'shared'/);
    expect((err as Error).message).toMatch(/use a backend that can: "rw"/);
    const reader = await engine.acquire('k', { mode: 'shared', backend: 'rw' }, 'try');
    expect(reader?.mode).toBe('shared');
    await reader?.release();
  });

  it.each([-1, 3, 1.5, '1'])(
    'a grant with slot %p outside 0..permits-1 is refused with LockBackendError, the grant released',
    async (permit) => {
      const backend = new DeclaredMemory(caps({ shared: true, permits: true }));
      const real = backend.tryAcquire.bind(backend);
      backend.tryAcquire = async (request) => {
        const grant = await real(request);
        return grant && ({ ...grant, permit } as LockGrant);
      };
      const { engine } = engineOver(backend);
      const err = await engine.acquire('k', { permits: 3 }, 'try').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockBackendError);
      expect((err as Error).message).toMatch(/outside 0\.\.2/);
      await new Promise((r) => setImmediate(r));
      expect(await backend.isLocked('p:k')).toBe(false);
    },
  );
});
