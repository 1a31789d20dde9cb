import { describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../../backends/memory/memory.backend';
import type { LockBackendCapabilities } from '../contract/lock-backend';
import type { LockSettings } from '../settings/module-options';
import { LockEngine } from './lock-engine';

/** The real memory store, declared session-bound like ZooKeeper or a held DB connection. */
class SessionBoundMemory extends MemoryLockBackend {
  override readonly capabilities: LockBackendCapabilities = {
    leaseBased: false,
    fencing: true,
    waiting: 'queue',
  };
}

const settings: LockSettings = {
  defaultBackend: 's',
  keyPrefix: '',
  ttl: 10_000,
  waitTimeout: 0,
  autoRenew: true,
  shutdown: { inFlight: 'abort', timeout: 10_000 },
  operationTimeout: 5_000,
};
/** Keeps the expected shutdown log lines out of the test output. */
class QuietLogger extends Logger {
  override log(): void {}
  override warn(): void {}
}
const quiet = new QuietLogger('test');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('LockEngine lockAtLeastFor on a session-bound store', () => {
  it('keeps the key taken until lockAtLeastFor has passed, then releases it', async () => {
    const engine = new LockEngine(new Map([['s', new SessionBoundMemory()]]), settings, quiet);
    const lock = await engine.acquire('job', { lockAtLeastFor: 150 }, 'wait');
    await lock.release();
    expect(lock.isHeld()).toBe(false);
    expect(await engine.isLocked('job', undefined)).toBe(true);
    await sleep(250);
    expect(await engine.isLocked('job', undefined)).toBe(false);
    await engine.close();
  });

  it('sends pending deferred releases at shutdown, before the store is closed', async () => {
    const backend = new SessionBoundMemory();
    const engine = new LockEngine(new Map([['s', backend]]), settings, quiet);
    const lock = await engine.acquire('job', { lockAtLeastFor: 60_000 }, 'wait');
    await lock.release();
    expect(await backend.isLocked('job')).toBe(true);
    await engine.beforeShutdown();
    expect(await backend.isLocked('job')).toBe(false);
    await engine.close();
  });
});

/** The real memory store whose renewals fail in a chosen way (a store that went away). */
class FailingRenewals extends MemoryLockBackend {
  constructor(private readonly mode: 'hang' | 'throw') {
    super();
  }
  extendCalls = 0;
  override extend(): Promise<boolean> {
    this.extendCalls++;
    return this.mode === 'hang'
      ? new Promise<boolean>(() => undefined)
      : Promise.reject(new Error('ECONNRESET'));
  }
}

describe('LockEngine watchdog', () => {
  it.each(['hang', 'throw'] as const)(
    'declares the lock lost at its monotonic deadline when renewals %s',
    async (mode) => {
      const backend = new FailingRenewals(mode);
      const engine = new LockEngine(new Map([['s', backend]]), settings, quiet);
      const lost: string[] = [];
      const errors: string[] = [];
      engine.on('lost', (e) => lost.push(e.reason ?? ''));
      engine.on('error', (e) => errors.push(e.reason ?? ''));
      const started = performance.now();
      const lock = await engine.acquire('k', { ttl: 300 }, 'wait');
      const reason = await new Promise<unknown>((resolve) =>
        lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)),
      );
      const elapsed = performance.now() - started;
      expect(reason).toMatchObject({ code: 'LOCK_LOST' });
      expect(elapsed).toBeGreaterThanOrEqual(295);
      expect(lock.isHeld()).toBe(false);
      expect(lost).toHaveLength(1);
      expect(lost[0]).toMatch(/expired before it could be renewed/);
      expect(backend.extendCalls).toBeGreaterThanOrEqual(1);
      if (mode === 'throw')
        expect(errors.some((r) => /renewal failed: ECONNRESET/.test(r))).toBe(true);
      await lock.release(); // no-op on a lost lock, must not throw
      await engine.close();
    },
  );
});

/** The real memory store whose acquire attempts never answer (a black-holed connection). */
class SilentAcquire extends MemoryLockBackend {
  override tryAcquire(): Promise<null> {
    return new Promise<null>(() => undefined);
  }
}

describe('LockEngine operationTimeout', () => {
  it('fails a hanging store call with LockBackendError instead of hanging the caller', async () => {
    const engine = new LockEngine(
      new Map([['s', new SilentAcquire()]]),
      { ...settings, operationTimeout: 150 },
      quiet,
    );
    const errors: string[] = [];
    engine.on('error', (e) => errors.push(e.reason ?? ''));
    const started = performance.now();
    const err = await engine.acquire('k', { waitTimeout: 10_000 }, 'wait').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'LOCK_BACKEND' });
    expect(String((err as Error).message)).toMatch(/no answer within 150 ms/);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(errors).toHaveLength(1);
    await engine.close();
  });
});

describe('LockEngine shutdown of in-flight work', () => {
  const withShutdown = (inFlight: 'finish' | 'abort', timeout = 10_000): LockSettings => ({
    ...settings,
    shutdown: { inFlight, timeout },
  });
  /** `withLock` as LockService does it: acquire, run in scope, release. */
  const withLock = async <T>(m: LockEngine, key: string, fn: () => Promise<T>): Promise<T> => {
    const lock = await m.acquire(key, undefined, 'wait');
    try {
      return await m.runInScope(lock, fn);
    } finally {
      await lock.release();
    }
  };

  it("'finish' frees bare locks at once, lets scoped work finish (and re-enter), then closes", async () => {
    const backend = new SessionBoundMemory();
    const m = new LockEngine(new Map([['s', backend]]), withShutdown('finish'), quiet);
    const bare = await m.acquire('bare', undefined, 'wait');
    let finishWork!: () => void;
    const events: string[] = [];
    const work = withLock(m, 'job', async () => {
      await new Promise<void>((r) => (finishWork = r));
      // Re-entering a lock the work holds is allowed while shutting down...
      await withLock(m, 'job', async () => events.push('re-entered'));
      // ...a new lock is not.
      await m.acquire('other', undefined, 'try').catch((e: Error) => events.push(e.message));
      events.push('work done');
    });
    await sleep(5);
    const closing = m.close().then(() => events.push('closed'));
    await sleep(20);
    expect(bare.isHeld()).toBe(false);
    expect(await backend.isLocked('bare')).toBe(false);
    expect(await backend.isLocked('job')).toBe(true);
    expect(events).toEqual([]);
    finishWork();
    await work;
    await closing;
    expect(events).toEqual([
      're-entered',
      'Lock backend "s": the lock module is shutting down; no new acquisitions',
      'work done',
      'closed',
    ]);
  });

  it("'finish' aborts work still running after the timeout: its signal fires, the lock is freed", async () => {
    const backend = new SessionBoundMemory();
    const m = new LockEngine(new Map([['s', backend]]), withShutdown('finish', 100), quiet);
    const started = performance.now();
    let abortedAfter = -1;
    const work = withLock(m, 'job', async () => {
      const lock = m.current()!;
      await new Promise<void>((r) => lock.signal.addEventListener('abort', () => r()));
      abortedAfter = performance.now() - started;
    });
    await sleep(5);
    await m.beforeShutdown();
    await work;
    expect(abortedAfter).toBeGreaterThanOrEqual(95);
    expect(abortedAfter).toBeLessThan(1_000);
    expect(await backend.isLocked('job')).toBe(false);
    await m.close();
  });

  it("'abort' frees every lock at once and aborts the running work's signal", async () => {
    const backend = new SessionBoundMemory();
    const m = new LockEngine(new Map([['s', backend]]), withShutdown('abort'), quiet);
    let aborted = false;
    const work = withLock(m, 'job', async () => {
      const lock = m.current()!;
      await new Promise<void>((r) => lock.signal.addEventListener('abort', () => r()));
      aborted = true;
    });
    await sleep(5);
    const started = performance.now();
    await m.beforeShutdown();
    await work;
    expect(aborted).toBe(true);
    expect(performance.now() - started).toBeLessThan(500);
    expect(await backend.isLocked('job')).toBe(false);
    await m.close();
  });

  it('a lockAtLeastFor release that work asks for while shutting down is sent before the store closes', async () => {
    const backend = new SessionBoundMemory();
    const m = new LockEngine(new Map([['s', backend]]), withShutdown('finish'), quiet);
    let finishWork!: () => void;
    const lock = await m.acquire('job', { lockAtLeastFor: 60_000 }, 'wait');
    const work = m
      .runInScope(lock, () => new Promise<void>((r) => (finishWork = r)))
      .then(() => lock.release());
    const closing = m.beforeShutdown();
    await sleep(10);
    finishWork();
    await work;
    await closing;
    // Released by shutdown, not left to a timer that would fire after the store closed.
    expect(await backend.isLocked('job')).toBe(false);
    await m.close();
  });
});
