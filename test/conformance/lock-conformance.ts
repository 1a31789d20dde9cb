/**
 * The conformance battery: one set of cases, written once, run unchanged against every backend
 * configuration (memory, redis, redis cluster, redlock, zookeeper, typeorm table / for-update /
 * advisory on postgres, mariadb, sqlite). A backend spec only describes its target:
 *
 * ```ts
 * runLockConformance({ name: 'memory', setup: async () => ({ config: { type: 'memory' } }),
 *   fencing: true, leaseBased: true, shortTtl: 300 });
 * ```
 *
 * "Another client" is played by a second, independent async context of the same app: a lock
 * taken with a bare `acquire()` is not entered into the async context, so two such calls contend
 * exactly like two processes would. Every test uses its own keys, so a failure cannot leak a
 * held lock into the next test.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { MAX_KEY_LENGTH } from '../../lib/core/settings/validation';
import { LockConfigError, LockLostError, LockNotAcquiredError } from '../../lib/errors/lock.errors';
import type { Lock, LockEvent, LockEventName, LockOptions } from '../../lib/lock.interfaces';
import { createLockApp } from '../support/lock-app';

/** One backend configuration the battery runs against. */
export interface ConformanceTarget {
  /** label used in describe() */
  name: string;
  /** create a fresh backend config for one test app; called in beforeAll */
  setup(): Promise<{ config: LockBackendConfig; teardown?: () => Promise<void> }>;
  /** capabilities that vary by backend */
  fencing: boolean; // false => fence must be null
  leaseBased: boolean; // true => ttl expiry releases a lock whose holder stopped renewing
  /** a ttl small enough for fast tests but safe for this backend (memory: 300) */
  shortTtl: number;
  /**
   * Optional: `true` when two app instances built from the same config share lock state (a real
   * server). Adds a case where contenders come from two apps. Never set for `memory`.
   */
  sharedAcrossApps?: boolean;
}

type LockApp = Awaited<ReturnType<typeof createLockApp>>;
type Locks = LockApp['locks'];

/** Name of the single backend every conformance app configures. */
const BACKEND = 'b';
/** Generous bound for "at once" / "quickly" on a loaded 2-core machine. */
const QUICK_MS = 1_000;

// ---------------------------------------------------------------------------------------------
// small helpers

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rejects with a descriptive error if `promise` does not settle within `ms`; clears its timer. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Settles a promise into a value, so rejections can be inspected after the fact. */
function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/** Whether `promise` is still pending after `ms`. */
async function stillPendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol('pending');
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    promise.then(
      () => 'settled',
      () => 'settled',
    ),
    new Promise<symbol>((resolve) => {
      timer = setTimeout(() => resolve(marker), ms);
    }),
  ]);
  clearTimeout(timer);
  return result === marker;
}

/** Resolves when `signal` aborts (at once if it already has). */
function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

/** Records the events of the given names until `stop()`. */
function recordEvents(locks: Locks, names: readonly LockEventName[]) {
  const events: LockEvent[] = [];
  const offs = names.map((name) => locks.on(name, (e) => events.push(e)));
  return {
    events,
    of(type: LockEventName, key: string): LockEvent[] {
      return events.filter((e) => e.type === type && e.key === key);
    },
    stop(): void {
      for (const off of offs) off();
    },
  };
}

/** Resolves with the first event of `name` matching `match`, within `ms`. */
async function nextEvent(
  locks: Locks,
  name: LockEventName,
  match: (e: LockEvent) => boolean,
  ms: number,
): Promise<LockEvent> {
  const got = deferred<LockEvent>();
  const off = locks.on(name, (e) => {
    if (match(e)) got.resolve(e);
  });
  try {
    return await within(got.promise, ms, `a '${name}' event`);
  } finally {
    off();
  }
}

const BACKEND_METHODS = ['tryAcquire', 'acquire', 'extend', 'release', 'isLocked'] as const;
type BackendMethod = (typeof BACKEND_METHODS)[number];

/** Wraps the raw backend's methods with call counters; `restore()` puts the originals back. */
function countBackendCalls(backend: LockBackend) {
  const target = backend as unknown as Record<string, unknown>;
  const counts = Object.fromEntries(BACKEND_METHODS.map((m) => [m, 0])) as Record<
    BackendMethod,
    number
  >;
  const restores: Array<() => void> = [];
  for (const method of BACKEND_METHODS) {
    const original = target[method];
    if (typeof original !== 'function') continue;
    const own = Object.prototype.hasOwnProperty.call(target, method);
    const fn = original as (...args: unknown[]) => unknown;
    target[method] = function counted(this: unknown, ...args: unknown[]): unknown {
      counts[method] += 1;
      return fn.apply(this, args);
    };
    restores.push(() => {
      if (own) target[method] = original;
      else delete target[method];
    });
  }
  return {
    counts,
    total: (): number => BACKEND_METHODS.reduce((sum, m) => sum + counts[m], 0),
    restore(): void {
      for (const restore of restores.reverse()) restore();
    },
  };
}

function expectLockLost(reason: unknown, key: string): void {
  expect(reason).toBeInstanceOf(LockLostError);
  const err = reason as LockLostError;
  expect(err.code).toBe('LOCK_LOST');
  expect(err.key).toBe(key);
  expect(err.backend).toBe(BACKEND);
}

function expectNotAcquired(reason: unknown, key: string): LockNotAcquiredError {
  expect(reason).toBeInstanceOf(LockNotAcquiredError);
  const err = reason as LockNotAcquiredError;
  expect(err.code).toBe('LOCK_NOT_ACQUIRED');
  expect(err.key).toBe(key);
  expect(err.backend).toBe(BACKEND);
  expect(typeof err.waitedMs).toBe('number');
  expect(err.waitedMs).toBeGreaterThanOrEqual(0);
  return err;
}

/**
 * N contenders x rounds on one key, half through `withLock`, half through bare `acquire`, each
 * doing read -> random sleep -> write on a shared counter: a lost update or two sections at once
 * means exclusion failed. Fences are recorded inside the critical section, i.e. in grant order.
 */
async function runExclusion(
  services: readonly Locks[],
  key: string,
  contenders: number,
  rounds: number,
  fencing: boolean,
): Promise<void> {
  let counter = 0;
  let inside = 0;
  let maxInside = 0;
  const fences: Array<number | null> = [];
  const tokens = new Set<string>();
  const notHeldInside: string[] = [];
  const critical = async (lock: Lock): Promise<void> => {
    inside += 1;
    maxInside = Math.max(maxInside, inside);
    if (!lock.isHeld()) notHeldInside.push(lock.token);
    fences.push(lock.fence);
    tokens.add(lock.token);
    const read = counter;
    await sleep(Math.random() * 3);
    counter = read + 1;
    inside -= 1;
  };
  const opts: LockOptions = { waitTimeout: 25_000 };
  await Promise.all(
    Array.from({ length: contenders }, async (_, i) => {
      const locks = services[i % services.length];
      for (let round = 0; round < rounds; round++) {
        if ((i + round) % 2 === 0) {
          await locks.withLock(key, critical, opts);
        } else {
          const lock = await locks.acquire(key, opts);
          try {
            await critical(lock);
          } finally {
            await lock.release();
          }
        }
      }
    }),
  );
  const sections = contenders * rounds;
  expect(maxInside).toBe(1);
  expect(counter).toBe(sections);
  expect(notHeldInside).toEqual([]);
  expect(tokens.size).toBe(sections);
  expect(fences).toHaveLength(sections);
  if (fencing) {
    for (let i = 1; i < fences.length; i++) {
      expect(typeof fences[i]).toBe('number');
      expect(fences[i] as number).toBeGreaterThan(fences[i - 1] as number);
    }
  } else {
    expect(fences.every((f) => f === null)).toBe(true);
  }
  await Promise.all(services.map(async (s) => expect(await s.isLocked(key)).toBe(false)));
}

// ---------------------------------------------------------------------------------------------

/** Declares `describe('conformance: <name>')` with every case of the battery. */
/**
 * Registers a case only where it applies to the backend. A case that does not apply is not
 * declared at all, so it can never show up as a skipped test counted alongside passing ones.
 */
function when(applies: boolean): typeof it {
  return applies ? it : ((() => undefined) as unknown as typeof it);
}

export function runLockConformance(target: ConformanceTarget): void {
  describe(`conformance: ${target.name}`, () => {
    const ttl = target.shortTtl;
    const prefix = `conf-${randomUUID().slice(0, 8)}:`;
    let config: LockBackendConfig;
    let teardown: (() => Promise<void>) | undefined;
    let app: LockApp | undefined;
    let locks: Locks;
    let backend: LockBackend;

    /** Locks a test took; released after each test whatever happened. */
    const taken: Lock[] = [];
    const track = (lock: Lock): Lock => {
      taken.push(lock);
      return lock;
    };
    const acquire = async (
      key: string | string[],
      opts?: LockOptions,
      service: Locks = locks,
    ): Promise<Lock> => track(await service.acquire(key, opts));
    const tryAcquire = async (key: string | string[], opts?: LockOptions): Promise<Lock | null> => {
      const lock = await locks.tryAcquire(key, opts);
      return lock ? track(lock) : null;
    };
    /** A unique key per call, so tests never see each other's locks. */
    const newKey = (label: string): string => `${label}-${randomUUID().slice(0, 8)}`;
    const metrics = () => locks.getMetrics()[BACKEND];

    beforeAll(async () => {
      const created = await target.setup();
      config = created.config;
      teardown = created.teardown;
      app = await createLockApp({ backends: { [BACKEND]: config }, keyPrefix: prefix });
      locks = app.locks;
      backend = app.manager.getBackend(BACKEND);
    });

    afterEach(async () => {
      const pending = taken.splice(0);
      await Promise.all(pending.map((lock) => lock.release().catch(() => undefined)));
    });

    afterAll(async () => {
      try {
        await app?.close();
      } finally {
        await teardown?.();
      }
    });

    // -------------------------------------------------------------------------------------------
    describe('mutual exclusion', () => {
      it('serializes 8 concurrent clients x 3 rounds: no lost update, fences rise in grant order', async () => {
        await runExclusion([locks], newKey('excl'), 8, 3, target.fencing);
      }, 60_000);

      when(target.sharedAcrossApps === true)(
        'serializes contenders from two app instances sharing the store',
        async () => {
          const second = await createLockApp({
            backends: { [BACKEND]: config },
            keyPrefix: prefix,
          });
          try {
            await runExclusion([locks, second.locks], newKey('excl2'), 8, 3, target.fencing);
          } finally {
            await second.close();
          }
        },
        60_000,
      );

      it('a second client cannot take a held key; isLocked reports it', async () => {
        const key = newKey('held');
        expect(await locks.isLocked(key)).toBe(false);
        const a = await acquire(key);
        expect(a.isHeld()).toBe(true);
        expect(a.key).toBe(key);
        expect(a.keys).toEqual([key]);
        expect(a.backend).toBe(BACKEND);
        expect(typeof a.token).toBe('string');
        expect(a.token.length).toBeGreaterThanOrEqual(16);
        expect(a.signal.aborted).toBe(false);
        expect(await locks.isLocked(key)).toBe(true);
        expect(await backend.isLocked(prefix + key)).toBe(true);
        expect(await tryAcquire(key)).toBeNull();
        await a.release();
        expect(a.isHeld()).toBe(false);
        expect(a.signal.aborted).toBe(true);
        expect(await locks.isLocked(key)).toBe(false);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('ttl, renewal and extend', () => {
      when(target.leaseBased)(
        'ttl expiry: a holder that stops renewing loses the lock and another client takes over',
        async () => {
          const key = newKey('expiry');
          const lost = recordEvents(locks, ['lost']);
          try {
            const t0 = performance.now();
            const a = await acquire(key, { ttl, autoRenew: false });
            const b = await acquire(key, { waitTimeout: ttl * 10 + 5_000 });
            const tookOverAfter = performance.now() - t0;
            // not before A's lease ran out
            expect(tookOverAfter).toBeGreaterThanOrEqual(ttl * 0.9);
            // never two holders that both believe they hold it
            expect(a.isHeld()).toBe(false);
            expect(b.isHeld()).toBe(true);
            await within(aborted(a.signal), QUICK_MS, "the expired holder's signal");
            expectLockLost(a.signal.reason, key);
            await within(
              (async () => {
                while (!lost.of('lost', key).some((e) => e.token === a.token)) await sleep(10);
              })(),
              QUICK_MS,
              "a 'lost' event for the expired holder",
            );
            await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
            // release after expiry leaves the new holder's lock in place
            await a.release();
            expect(b.isHeld()).toBe(true);
            expect(await locks.isLocked(key)).toBe(true);
            expect(await tryAcquire(key)).toBeNull();
            if (target.fencing) expect(b.fence as number).toBeGreaterThan(a.fence as number);
            await b.release();
            expect(await locks.isLocked(key)).toBe(false);
          } finally {
            lost.stop();
          }
        },
      );

      when(target.leaseBased)(
        'a crashed holder (raw grant, never renewed nor released) blocks others only for its ttl',
        async () => {
          const key = newKey('crashed');
          const crashedToken = `crashed-${randomUUID()}`;
          const t0 = performance.now();
          // Taken straight on the store, as by a process that then died: no core, no watchdog,
          // so only the store's own expiry can free it.
          const grant = await backend.tryAcquire({
            key: prefix + key,
            token: crashedToken,
            ttlMs: ttl,
          });
          expect(grant).not.toBeNull();
          expect(await locks.isLocked(key)).toBe(true);
          expect(await tryAcquire(key)).toBeNull();
          const b = await acquire(key, { waitTimeout: ttl * 10 + 5_000 });
          expect(performance.now() - t0).toBeGreaterThanOrEqual(ttl * 0.9);
          expect(b.isHeld()).toBe(true);
          if (target.fencing && grant)
            expect(b.fence as number).toBeGreaterThan(grant.fence as number);
          // the crashed holder's late release or extend cannot touch the new holder
          expect(await backend.release(prefix + key, crashedToken)).toBe(false);
          expect(await backend.extend(prefix + key, crashedToken, ttl)).toBe(false);
          expect(b.isHeld()).toBe(true);
          expect(await locks.isLocked(key)).toBe(true);
          await b.release();
          expect(await locks.isLocked(key)).toBe(false);
        },
      );

      it('renewal keeps a lock held past its ttl while nobody else can take it', async () => {
        const key = newKey('renew');
        const rec = recordEvents(locks, ['renewed', 'lost']);
        try {
          const a = await acquire(key, { ttl });
          // The competitor's wait doubles as the passage of ~3 ttls.
          const t0 = performance.now();
          const b = await settle(locks.acquire(key, { waitTimeout: ttl * 3 }));
          if (b.ok) track(b.value);
          expect(b.ok).toBe(false);
          if (!b.ok) expectNotAcquired(b.error, key);
          expect(performance.now() - t0).toBeGreaterThanOrEqual(ttl * 3 * 0.9);
          expect(a.isHeld()).toBe(true);
          expect(a.signal.aborted).toBe(false);
          expect(await locks.isLocked(key)).toBe(true);
          expect(await tryAcquire(key)).toBeNull();
          expect(rec.of('lost', key)).toEqual([]);
          if (target.leaseBased) {
            const renewed = rec.of('renewed', key).filter((e) => e.token === a.token);
            expect(renewed.length).toBeGreaterThanOrEqual(2);
            expect(renewed[0].backend).toBe(BACKEND);
          }
          await a.release();
          expect(await locks.isLocked(key)).toBe(false);
        } finally {
          rec.stop();
        }
      });

      it('explicit extend keeps an autoRenew:false lock held past its original ttl', async () => {
        const key = newKey('extend');
        const t0 = performance.now();
        const a = await acquire(key, { ttl, autoRenew: false });
        await sleep(ttl / 3);
        await a.extend();
        await a.extend(ttl * 5);
        const remaining = t0 + ttl * 1.5 - performance.now();
        if (remaining > 0) await sleep(remaining);
        expect(a.isHeld()).toBe(true);
        expect(a.signal.aborted).toBe(false);
        expect(await locks.isLocked(key)).toBe(true);
        expect(await tryAcquire(key)).toBeNull();
        await a.release();
        expect(await locks.isLocked(key)).toBe(false);
        // extend after release is refused
        await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
      });

      it('extend after the lock was lost rejects LockLostError', async () => {
        const key = newKey('extend-lost');
        const a = await acquire(key, { ttl: Math.max(ttl * 20, 10_000), autoRenew: false });
        expect(await backend.release(prefix + key, a.token)).toBe(true);
        const err = await settle(a.extend());
        expect(err.ok).toBe(false);
        if (!err.ok) expectLockLost(err.error, key);
        expect(a.isHeld()).toBe(false);
        expect(a.signal.aborted).toBe(true);
      });

      it('lockAtLeastFor keeps the lock taken after an early release', async () => {
        const key = newKey('least');
        const atLeast = Math.max(400, ttl);
        const t0 = performance.now();
        const a = await acquire(key, { lockAtLeastFor: atLeast });
        await a.release();
        expect(await locks.isLocked(key)).toBe(true);
        const b = await acquire(key, { waitTimeout: atLeast + 10_000 });
        expect(performance.now() - t0).toBeGreaterThanOrEqual(atLeast * 0.9);
        await b.release();
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('ownership and release', () => {
      it('only the owner token can release or extend (raw backend)', async () => {
        const key = newKey('owner');
        const a = await acquire(key);
        expect(await backend.release(prefix + key, 'not-the-owner-token')).toBe(false);
        expect(await backend.extend(prefix + key, 'not-the-owner-token', 60_000)).toBe(false);
        expect(a.isHeld()).toBe(true);
        expect(await backend.isLocked(prefix + key)).toBe(true);
        expect(await locks.isLocked(key)).toBe(true);
        expect(await tryAcquire(key)).toBeNull();
        await a.release();
        expect(await locks.isLocked(key)).toBe(false);
      });

      it('double release is a no-op and never frees a new holder', async () => {
        const key = newKey('double');
        const rec = recordEvents(locks, ['released']);
        try {
          const a = await acquire(key);
          await a.release();
          await expect(a.release()).resolves.toBeUndefined();
          const b = await acquire(key, { waitTimeout: 5_000 });
          await expect(a.release()).resolves.toBeUndefined();
          expect(b.isHeld()).toBe(true);
          expect(await locks.isLocked(key)).toBe(true);
          expect(await tryAcquire(key)).toBeNull();
          expect(rec.of('released', key).filter((e) => e.token === a.token)).toHaveLength(1);
          await b.release();
          expect(await locks.isLocked(key)).toBe(false);
        } finally {
          rec.stop();
        }
      });

      it('release after the lock was lost leaves the new holder in place', async () => {
        const key = newKey('rel-lost');
        const a = await acquire(key, { ttl });
        expect(await backend.release(prefix + key, a.token)).toBe(true);
        const b = await acquire(key, { waitTimeout: 5_000 });
        await within(aborted(a.signal), ttl * 3 + 5_000, "the old holder's lost signal");
        await expect(a.release()).resolves.toBeUndefined();
        expect(b.isHeld()).toBe(true);
        expect(await locks.isLocked(key)).toBe(true);
        expect(await tryAcquire(key)).toBeNull();
        await b.release();
        expect(await locks.isLocked(key)).toBe(false);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('fencing', () => {
      it(
        target.fencing
          ? 'sequential grants carry strictly increasing fences'
          : 'fence is null on a backend without fencing',
        async () => {
          const key = newKey('fence');
          const fences: Array<number | null> = [];
          const tokens = new Set<string>();
          for (let i = 0; i < 5; i++) {
            const lock = await acquire(key);
            fences.push(lock.fence);
            expect(lock.fences).toEqual([lock.fence]);
            tokens.add(lock.token);
            await lock.release();
          }
          expect(tokens.size).toBe(5);
          if (target.fencing) {
            for (const fence of fences) expect(Number.isSafeInteger(fence)).toBe(true);
            for (let i = 1; i < fences.length; i++) {
              expect(fences[i] as number).toBeGreaterThan(fences[i - 1] as number);
            }
          } else {
            expect(fences).toEqual([null, null, null, null, null]);
          }
        },
      );
    });

    // -------------------------------------------------------------------------------------------
    describe('try vs wait', () => {
      it('tryAcquire on a busy key returns null quickly, whatever waitTimeout says', async () => {
        const key = newKey('try');
        await acquire(key);
        const t0 = performance.now();
        expect(await tryAcquire(key)).toBeNull();
        expect(await tryAcquire(key, { waitTimeout: 10_000 })).toBeNull();
        expect(performance.now() - t0).toBeLessThan(QUICK_MS);
      });

      it('acquire with waitTimeout 0 rejects LockNotAcquiredError at once', async () => {
        const key = newKey('wait0');
        await acquire(key);
        const t0 = performance.now();
        const r = await settle(acquire(key, { waitTimeout: 0 }));
        expect(performance.now() - t0).toBeLessThan(QUICK_MS);
        expect(r.ok).toBe(false);
        if (!r.ok) expectNotAcquired(r.error, key);
      });

      it('acquire with waitTimeout 200 rejects after about 200 ms', async () => {
        const key = newKey('wait200');
        await acquire(key);
        const t0 = performance.now();
        const r = await settle(acquire(key, { waitTimeout: 200 }));
        const elapsed = performance.now() - t0;
        expect(r.ok).toBe(false);
        if (!r.ok) {
          const err = expectNotAcquired(r.error, key);
          expect(err.waitedMs).toBeGreaterThanOrEqual(180);
        }
        expect(elapsed).toBeGreaterThanOrEqual(180);
        expect(elapsed).toBeLessThan(200 + 3_000);
      });

      it('a waiter gets the lock promptly once the holder releases', async () => {
        const key = newKey('handoff');
        const a = await acquire(key);
        const contended = nextEvent(locks, 'contended', (e) => e.key === key, 5_000);
        const waiter = acquire(key, { waitTimeout: 20_000 });
        await settle(contended); // the waiter is queued (or at least tried once)
        expect(await stillPendingAfter(waiter, 20)).toBe(true);
        const t0 = performance.now();
        await a.release();
        const b = await within(waiter, 10_000, 'the waiter');
        expect(performance.now() - t0).toBeLessThan(QUICK_MS);
        expect(b.isHeld()).toBe(true);
        if (target.fencing) expect(b.fence as number).toBeGreaterThan(a.fence as number);
      });

      it('waitTimeout Infinity waits until the holder releases', async () => {
        const key = newKey('forever');
        const a = await acquire(key);
        const contended = nextEvent(locks, 'contended', (e) => e.key === key, 5_000);
        const waiter = acquire(key, { waitTimeout: Infinity });
        await settle(contended);
        // A timer armed with Infinity would fire after 1 ms: the waiter must still be waiting.
        expect(await stillPendingAfter(waiter, Math.max(ttl, 300))).toBe(true);
        await a.release();
        const b = await within(waiter, 10_000, 'the waiter');
        expect(b.isHeld()).toBe(true);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('reentrancy', () => {
      it('re-acquiring inside withLock re-enters without a backend call; outermost release frees', async () => {
        const key = newKey('reenter');
        const inScope = deferred();
        const leave = deferred();
        const reentered0 = metrics().lock_reentered_total;
        const scope = locks.withLock(key, async (outer) => {
          const spy = countBackendCalls(backend);
          let inner: Lock;
          try {
            inner = await locks.acquire(key, { waitTimeout: 0 });
            expect(spy.counts.tryAcquire + spy.counts.acquire).toBe(0);
            expect(inner.token).toBe(outer.token);
            expect(inner.fence).toBe(outer.fence);
            await inner.release();
            expect(spy.counts.release).toBe(0);
          } finally {
            spy.restore();
          }
          expect(outer.isHeld()).toBe(true);
          expect(await locks.isLocked(key)).toBe(true);
          inScope.resolve();
          await leave.promise;
          return outer;
        });
        await Promise.race([
          inScope.promise,
          scope.then(() => {
            throw new Error('scope ended before reaching its checkpoint');
          }),
        ]);
        // The test body is another async context: it must not share the lock.
        expect(await tryAcquire(key)).toBeNull();
        expect(metrics().lock_reentered_total).toBe(reentered0 + 1);
        leave.resolve();
        const outer = await scope;
        expect(outer.isHeld()).toBe(false);
        expect(await locks.isLocked(key)).toBe(false);
      });

      it('nested withLock on the same key re-enters; three levels release in order', async () => {
        const key = newKey('nest');
        const result = await locks.withLock(key, async (l1) =>
          locks
            .withLock(key, async (l2) => {
              expect(l2.token).toBe(l1.token);
              expect(locks.current()?.token).toBe(l1.token);
              const l3 = await locks.acquire(key, { waitTimeout: 0 });
              expect(l3.token).toBe(l1.token);
              await l3.release();
              expect(l1.isHeld()).toBe(true);
              return 'nested';
            })
            .then(async (value) => {
              expect(l1.isHeld()).toBe(true);
              expect(await locks.isLocked(key)).toBe(true);
              return value;
            }),
        );
        expect(result).toBe('nested');
        expect(await locks.isLocked(key)).toBe(false);
      });

      it('two bare acquire() calls of one key contend (no re-entry outside withLock)', async () => {
        const key = newKey('bare');
        const a = await acquire(key);
        expect(await tryAcquire(key)).toBeNull();
        const r = await settle(acquire(key, { waitTimeout: 0 }));
        expect(r.ok).toBe(false);
        if (!r.ok) expectNotAcquired(r.error, key);
        expect(locks.current()).toBeUndefined();
        await a.release();
      });

      it('independent withLock calls started outside any lock do not share it', async () => {
        const key = newKey('siblings');
        let inside = 0;
        let maxInside = 0;
        let counter = 0;
        const tokens = new Set<string>();
        const section = async (lock: Lock): Promise<void> => {
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          tokens.add(lock.token);
          const read = counter;
          await new Promise((resolve) => setImmediate(resolve));
          await sleep(1);
          counter = read + 1;
          inside -= 1;
        };
        // 8 calls started in the same tick
        await Promise.all(
          Array.from({ length: 8 }, () => locks.withLock(key, section, { waitTimeout: 20_000 })),
        );
        expect(maxInside).toBe(1);
        expect(counter).toBe(8);
        expect(tokens.size).toBe(8);

        // latecomers started (outside any scope) while another call is inside its scope
        const inScope = deferred();
        const leave = deferred();
        let latecomersRan = 0;
        const first = locks.withLock(key, async (lock) => {
          inScope.resolve();
          await leave.promise;
          return lock.token;
        });
        await Promise.race([inScope.promise, first]);
        const latecomers = Array.from({ length: 3 }, () =>
          locks.withLock(
            key,
            async (lock) => {
              latecomersRan += 1;
              await section(lock);
              return lock.token;
            },
            { waitTimeout: 20_000 },
          ),
        );
        expect(await stillPendingAfter(Promise.race(latecomers), 50)).toBe(true);
        expect(latecomersRan).toBe(0);
        leave.resolve();
        const firstToken = await first;
        const lateTokens = await Promise.all(latecomers);
        expect(new Set([firstToken, ...lateTokens]).size).toBe(4);
        expect(maxInside).toBe(1);
        expect(counter).toBe(11);
      }, 60_000);

      it('re-entering a lock that was lost rejects LockLostError', async () => {
        const key = newKey('reenter-lost');
        let reentry: Settled<Lock> | undefined;
        let nested: Settled<unknown> | undefined;
        const nestedFn = jest.fn(async () => 'ran');
        const outcome = await settle(
          locks.withLock(
            key,
            async (outer) => {
              expect(await backend.release(prefix + key, outer.token)).toBe(true);
              await within(aborted(outer.signal), ttl * 3 + 5_000, 'the lost signal');
              reentry = await settle(locks.acquire(key, { waitTimeout: 0 }));
              if (reentry.ok) track(reentry.value);
              nested = await settle(locks.withLock(key, nestedFn, { waitTimeout: 0 }));
            },
            { ttl },
          ),
        );
        // whether withLock itself reports the loss is up to the core; the scope must have run
        if (!outcome.ok && !(outcome.error instanceof LockLostError)) throw outcome.error;
        expect(reentry?.ok).toBe(false);
        if (reentry && !reentry.ok) expectLockLost(reentry.error, key);
        expect(nested?.ok).toBe(false);
        if (nested && !nested.ok) expect(nested.error).toBeInstanceOf(LockLostError);
        expect(nestedFn).not.toHaveBeenCalled();
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('multi-key', () => {
      const pair = (): [string, string] => {
        const base = newKey('mk');
        return [`${base}-a`, `${base}-b`];
      };

      it('takes keys in canonical order and frees them all on release', async () => {
        const [ka, kb] = pair();
        const lock = await acquire([kb, ka]);
        expect(lock.keys).toEqual([ka, kb]);
        expect(lock.key).toBe(`${ka},${kb}`);
        expect(lock.fences).toHaveLength(2);
        if (target.fencing) {
          for (const f of lock.fences) expect(Number.isSafeInteger(f)).toBe(true);
          expect(lock.fence).toBe(lock.fences[0]);
        } else {
          expect(lock.fences).toEqual([null, null]);
          expect(lock.fence).toBeNull();
        }
        expect(await locks.isLocked(ka)).toBe(true);
        expect(await locks.isLocked(kb)).toBe(true);
        expect(await tryAcquire(ka)).toBeNull();
        expect(await tryAcquire(kb)).toBeNull();
        await lock.release();
        expect(await locks.isLocked(ka)).toBe(false);
        expect(await locks.isLocked(kb)).toBe(false);
      });

      it('all or none: a busy key rolls back the keys already granted', async () => {
        const [ka, kb] = pair();
        const holder = await acquire(kb);
        expect(await tryAcquire([kb, ka])).toBeNull();
        expect(await locks.isLocked(ka)).toBe(false);
        const r0 = await settle(acquire([kb, ka], { waitTimeout: 0 }));
        expect(r0.ok).toBe(false);
        if (!r0.ok) expectNotAcquired(r0.error, kb);
        expect(await locks.isLocked(ka)).toBe(false);
        // timing out after a partial grant (ka sorts first) must give ka back too
        const r1 = await settle(acquire([ka, kb], { waitTimeout: 200 }));
        expect(r1.ok).toBe(false);
        expect(await locks.isLocked(ka)).toBe(false);
        const other = await tryAcquire(ka);
        expect(other).not.toBeNull();
        await other?.release();
        expect(holder.isHeld()).toBe(true);
        // and once the busy key frees up, a waiter gets both
        const waiter = acquire([kb, ka], { waitTimeout: 10_000 });
        await holder.release();
        const both = await within(waiter, 10_000, 'the multi-key waiter');
        expect(both.keys).toEqual([ka, kb]);
        await both.release();
        expect(await locks.isLocked(ka)).toBe(false);
        expect(await locks.isLocked(kb)).toBe(false);
      });

      it('opposite key orders from concurrent clients do not deadlock', async () => {
        const [ka, kb] = pair();
        let inside = 0;
        let maxInside = 0;
        await Promise.all(
          Array.from({ length: 4 }, async (_, i) => {
            for (let round = 0; round < 3; round++) {
              const keys = (i + round) % 2 === 0 ? [ka, kb] : [kb, ka];
              await locks.withLock(
                keys,
                async () => {
                  inside += 1;
                  maxInside = Math.max(maxInside, inside);
                  await sleep(1);
                  inside -= 1;
                },
                { waitTimeout: 20_000 },
              );
            }
          }),
        );
        expect(maxInside).toBe(1);
        expect(await locks.isLocked(ka)).toBe(false);
        expect(await locks.isLocked(kb)).toBe(false);
      }, 60_000);
    });

    // -------------------------------------------------------------------------------------------
    describe('lost lock', () => {
      it('a refused renewal aborts the signal with LockLostError, emits lost, counts the metric', async () => {
        const key = newKey('lost');
        const lostBefore = metrics().lock_lost_total;
        const a = await acquire(key, { ttl });
        const lostEvent = nextEvent(
          locks,
          'lost',
          (e) => e.key === key && e.token === a.token,
          ttl * 3 + 5_000,
        );
        // lose it behind the holder's back; the watchdog's next renewal (ttl/3) is refused
        expect(await backend.release(prefix + key, a.token)).toBe(true);
        await within(aborted(a.signal), ttl * 3 + 5_000, 'the lost signal');
        expectLockLost(a.signal.reason, key);
        expect(a.isHeld()).toBe(false);
        const e = await lostEvent;
        expect(e.backend).toBe(BACKEND);
        expect(metrics().lock_lost_total).toBe(lostBefore + 1);
        await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
        await expect(a.release()).resolves.toBeUndefined();
        const b = await tryAcquire(key);
        expect(b).not.toBeNull();
        await b?.release();
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('events and metrics', () => {
      it('acquired / contended / released carry the unprefixed key, backend and token', async () => {
        const key = newKey('events');
        const rec = recordEvents(locks, ['acquired', 'released', 'contended']);
        try {
          const a = await acquire(key);
          const contended = nextEvent(locks, 'contended', (e) => e.key === key, 5_000);
          const waiter = acquire(key, { waitTimeout: 10_000 });
          await contended;
          await a.release();
          const b = await within(waiter, 10_000, 'the waiter');
          await b.release();

          const acquired = rec.of('acquired', key);
          expect(acquired.map((e) => e.token)).toEqual([a.token, b.token]);
          const released = rec.of('released', key);
          expect(released.map((e) => e.token)).toEqual([a.token, b.token]);
          const contendedEvents = rec.of('contended', key);
          expect(contendedEvents.length).toBeGreaterThanOrEqual(1);
          expect(contendedEvents.map((e) => e.token)).toContain(b.token);
          for (const e of [...acquired, ...released, ...contendedEvents]) {
            expect(e.key).toBe(key);
            expect(e.backend).toBe(BACKEND);
            expect(typeof e.token).toBe('string');
          }
          if (target.fencing) expect(acquired.map((e) => e.fence)).toEqual([a.fence, b.fence]);
          // no event key carries the module prefix
          expect(rec.events.filter((e) => e.key.startsWith(prefix))).toEqual([]);

          // unsubscribing stops delivery
          rec.stop();
          const count = rec.events.length;
          const c = await acquire(key);
          await c.release();
          expect(rec.events).toHaveLength(count);
        } finally {
          rec.stop();
        }
      });

      it('metrics count attempts, grants, refusals, re-entries and held locks', async () => {
        const key = newKey('metrics');
        const m0 = { ...metrics() };
        const a = await acquire(key);
        const m1 = { ...metrics() };
        expect(m1.lock_acquire_attempts_total).toBe(m0.lock_acquire_attempts_total + 1);
        expect(m1.lock_acquired_total).toBe(m0.lock_acquired_total + 1);
        expect(m1.lock_held).toBe(m0.lock_held + 1);
        expect(await tryAcquire(key)).toBeNull();
        const m2 = { ...metrics() };
        expect(m2.lock_acquire_attempts_total).toBe(m1.lock_acquire_attempts_total + 1);
        expect(m2.lock_not_acquired_total).toBe(m1.lock_not_acquired_total + 1);
        await a.release();
        const m3 = metrics();
        expect(m3.lock_held).toBe(m0.lock_held);
        expect(m3.lock_hold_seconds.count).toBe(m0.lock_hold_seconds.count + 1);
        expect(m3.lock_wait_seconds.count).toBeGreaterThanOrEqual(m0.lock_wait_seconds.count + 1);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('bad input', () => {
      it('is rejected with LockConfigError before any backend I/O', async () => {
        const longKey = 'x'.repeat(MAX_KEY_LENGTH + 1);
        const badKeys: Array<[string, unknown, string]> = [
          ["key ''", '', 'key'],
          ['key over MAX_KEY_LENGTH characters', longKey, 'key'],
          ['numeric key', 42, 'key'],
          ['undefined key', undefined, 'key'],
          ['null key', null, 'key'],
          ['object key', { id: 1 }, 'key'],
          ['empty key array', [], 'key'],
          ["key array holding ''", ['ok', ''], 'key'],
          ['key array holding a number', ['ok', 7], 'key'],
        ];
        const badOptions: Array<[string, LockOptions, string]> = [
          ['ttl 0', { ttl: 0 }, 'ttl'],
          ['ttl -1', { ttl: -1 }, 'ttl'],
          ['ttl NaN', { ttl: NaN }, 'ttl'],
          ['ttl Infinity', { ttl: Infinity }, 'ttl'],
          ['waitTimeout -1', { waitTimeout: -1 }, 'waittimeout'],
          ['waitTimeout NaN', { waitTimeout: NaN }, 'waittimeout'],
          ["unknown backend 'nope'", { backend: 'nope' }, 'backend'],
          ['lockAtLeastFor -1', { lockAtLeastFor: -1 }, 'lockatleastfor'],
        ];
        type Call = [string, string, () => Promise<unknown>];
        const fn = jest.fn(async (_lock: Lock) => 'ran');
        const calls: Call[] = [];
        const goodKey = newKey('bad-input');
        for (const [label, key, field] of badKeys) {
          const k = key as string | string[];
          calls.push([`acquire(${label})`, field, () => locks.acquire(k)]);
          calls.push([`tryAcquire(${label})`, field, () => locks.tryAcquire(k)]);
          calls.push([`withLock(${label})`, field, () => locks.withLock(k, fn)]);
          calls.push([`isLocked(${label})`, field, () => locks.isLocked(key as string)]);
        }
        for (const [label, opts, field] of badOptions) {
          calls.push([`acquire(${label})`, field, () => locks.acquire(goodKey, opts)]);
          calls.push([`tryAcquire(${label})`, field, () => locks.tryAcquire(goodKey, opts)]);
          calls.push([`withLock(${label})`, field, () => locks.withLock(goodKey, fn, opts)]);
        }
        calls.push([
          "isLocked(unknown backend 'nope')",
          'backend',
          () => locks.isLocked(goodKey, { backend: 'nope' }),
        ]);

        const failures: string[] = [];
        const spy = countBackendCalls(backend);
        try {
          for (const [label, field, call] of calls) {
            const before = spy.total();
            let promise: Promise<unknown>;
            try {
              promise = call();
            } catch (err) {
              failures.push(`${label}: threw synchronously instead of rejecting (${String(err)})`);
              continue;
            }
            const r = await settle(promise);
            if (r.ok) {
              failures.push(`${label}: resolved instead of rejecting`);
              if (r.value && typeof r.value === 'object' && 'release' in r.value) {
                await (r.value as Lock).release();
              }
            } else if (!(r.error instanceof LockConfigError)) {
              failures.push(`${label}: rejected with ${String(r.error)}, not LockConfigError`);
            } else {
              if (r.error.code !== 'LOCK_CONFIG') failures.push(`${label}: code ${r.error.code}`);
              if (
                typeof r.error.field !== 'string' ||
                !r.error.field.toLowerCase().includes(field)
              ) {
                failures.push(
                  `${label}: field '${String(r.error.field)}' does not name '${field}'`,
                );
              }
            }
            if (spy.total() !== before) {
              failures.push(`${label}: made ${spy.total() - before} backend call(s) first`);
            }
          }
          // positive control: the counters do see the core's backend calls
          await locks.isLocked(goodKey);
          const probe = await locks.tryAcquire(goodKey);
          await probe?.release();
          expect(spy.counts.isLocked).toBeGreaterThanOrEqual(1);
          expect(spy.counts.tryAcquire + spy.counts.acquire).toBeGreaterThanOrEqual(1);
        } finally {
          spy.restore();
        }
        expect(failures).toEqual([]);
        expect(fn).not.toHaveBeenCalled();
        expect(await locks.isLocked(goodKey)).toBe(false);
      });

      it('accepts a key of exactly MAX_KEY_LENGTH characters', async () => {
        const key = newKey('max').padEnd(MAX_KEY_LENGTH, 'k');
        const lock = await acquire(key);
        expect(lock.key).toBe(key);
        expect(await locks.isLocked(key)).toBe(true);
        await lock.release();
        expect(await locks.isLocked(key)).toBe(false);
      });

      it('treats keys of any content as distinct locks (spaces, unicode, braces, slashes, quotes)', async () => {
        const base = newKey('content');
        const suffixes = [
          ' a b ',
          'ünï©ødé 🔒',
          '{tag}',
          '{tag}x',
          'a{b}c',
          '/x/../y',
          'q\'"`',
          '%2F',
          'A',
          'a',
          '\t',
        ];
        const keys = suffixes.map((s) => `${base}${s}`);
        const held = [];
        for (const key of keys) held.push(await acquire(key, { waitTimeout: 0 }));
        try {
          for (const [i, key] of keys.entries()) {
            expect(held[i].key).toBe(key);
            expect(await locks.isLocked(key)).toBe(true);
            expect(await locks.tryAcquire(key)).toBeNull();
          }
        } finally {
          for (const lock of held) await lock.release();
        }
        for (const key of keys) expect(await locks.isLocked(key)).toBe(false);
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('health', () => {
      it('health() pings the store: up with a latency; bad options are LockConfigError', async () => {
        const report = await locks.health({ timeout: 2_000 });
        expect(Object.keys(report)).toEqual([BACKEND]);
        expect(report[BACKEND]).toEqual({ status: 'up', latencyMs: expect.any(Number) });
        expect(report[BACKEND].latencyMs).toBeLessThan(2_000);
        await expect(locks.health({ timeout: 0 })).rejects.toMatchObject({
          code: 'LOCK_CONFIG',
          field: 'options.timeout',
        });
        await expect(locks.health({ backends: ['nope'] })).rejects.toMatchObject({
          code: 'LOCK_CONFIG',
          field: 'backend',
        });
      });
    });

    // -------------------------------------------------------------------------------------------
    describe('scopes', () => {
      it('`await using` releases the lock at scope end, also when the scope throws', async () => {
        const key = newKey('using');
        let seen: Lock | undefined;
        {
          await using lock = await locks.acquire(key);
          seen = lock;
          expect(await locks.isLocked(key)).toBe(true);
        }
        expect(seen.isHeld()).toBe(false);
        expect(await locks.isLocked(key)).toBe(false);

        const boom = new Error('boom');
        const thrown = await settle(
          (async () => {
            await using lock = await locks.acquire(key);
            seen = lock;
            throw boom;
          })(),
        );
        expect(thrown.ok ? undefined : thrown.error).toBe(boom);
        expect(seen.isHeld()).toBe(false);
        expect(await locks.isLocked(key)).toBe(false);
      });

      it('current() is the innermost withLock lock, per async context, undefined outside', async () => {
        const [k1, k2, k3] = [newKey('cur1'), newKey('cur2'), newKey('cur3')];
        expect(locks.current()).toBeUndefined();
        await locks.withLock(k1, async (l1) => {
          expect(locks.current()).toBe(l1);
          await locks.withLock(k2, async (l2) => {
            expect(locks.current()).toBe(l2);
            await sleep(1);
            expect(locks.current()).toBe(l2);
          });
          expect(locks.current()).toBe(l1);
          // a lock released early inside its own scope is no longer current
          await locks.withLock(k2, async (l2) => {
            await l2.release();
            expect(locks.current()).toBe(l1);
          });
        });
        expect(locks.current()).toBeUndefined();
        // a bare acquire() does not enter the context
        const bare = await acquire(k3);
        expect(locks.current()).toBeUndefined();
        await bare.release();
        // concurrent scopes each see their own lock across awaits
        await Promise.all(
          [k1, k2].map((k) =>
            locks.withLock(k, async (own) => {
              for (let i = 0; i < 3; i++) {
                await sleep(Math.random() * 3);
                expect(locks.current()).toBe(own);
              }
            }),
          ),
        );
        expect(locks.current()).toBeUndefined();
      });

      it('withLock returns the value, rethrows the same error object and always releases', async () => {
        const key = newKey('with');
        let seen: Lock | undefined;
        const value = await locks.withLock(key, (lock) => {
          seen = lock;
          return 42;
        });
        expect(value).toBe(42);
        expect(seen?.isHeld()).toBe(false);
        expect(seen?.signal.aborted).toBe(true);
        expect(await locks.isLocked(key)).toBe(false);

        const sync = new Error('sync boom');
        const r1 = await settle(
          locks.withLock(key, () => {
            throw sync;
          }),
        );
        expect(r1.ok ? undefined : r1.error).toBe(sync);
        expect(await locks.isLocked(key)).toBe(false);

        class DomainError extends Error {}
        const rejected = new DomainError('async boom');
        const r2 = await settle(
          locks.withLock(key, async () => {
            await sleep(1);
            throw rejected;
          }),
        );
        expect(r2.ok ? undefined : r2.error).toBe(rejected);
        expect(await locks.isLocked(key)).toBe(false);

        const notAnError = { reason: 'plain object' };
        const r3 = await settle(
          locks.withLock(key, async () => {
            throw notAnError;
          }),
        );
        expect(r3.ok ? undefined : r3.error).toBe(notAnError);
        expect(await locks.isLocked(key)).toBe(false);
        const after = await tryAcquire(key);
        expect(after).not.toBeNull();
        await after?.release();
      });
    });
  });
}
