import 'reflect-metadata';
import { describe, it, expect } from '@jest/globals';
import {
  type ConfigurableModuleOptionsFactory,
  type DynamicModule,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  type Provider,
  type Type,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  InjectLockBackend,
  LockBackendError,
  LockShuttingDownError,
  LockConfigError,
  LockError,
  LockLostError,
  LockModule,
  LockService,
  getLockBackendToken,
  type Lock,
  type LockEvent,
  type LockEventName,
  type LockModuleOptions,
} from '../../lib/index';
import { loadOptionalPackage } from '../../lib/core/shared/optional-package';
import { LOCK_ENGINE } from '../../lib/lock.constants';
import type { LockEngine } from '../../lib/core/engine/lock-engine';
import { createLockApp } from '../support/lock-app';

const MEMORY = { type: 'memory' } as const;

/** Bootstraps `LockModule.forRoot(opts)` and returns what it rejected with (fails if it did not). */
async function bootstrapError(opts: unknown): Promise<unknown> {
  let moduleRef;
  try {
    moduleRef = await Test.createTestingModule({
      imports: [LockModule.forRoot(opts as never)],
    }).compile();
  } catch (err) {
    return err;
  }
  await moduleRef.close();
  throw new Error(`bootstrap unexpectedly succeeded for ${String(JSON.stringify(opts))}`);
}

/** Builds and initialises a real Nest application from the given module parts. */
async function bootstrap(
  imports: Array<Type<unknown> | DynamicModule>,
  providers: Provider[] = [],
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports, providers }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

/** Records every event of the given types, in order. */
function recordEvents(locks: LockService, types: LockEventName[]): LockEvent[] {
  const seen: LockEvent[] = [];
  for (const type of types) locks.on(type, (e) => seen.push(e));
  return seen;
}

/** Resolves with the next event of `type`. */
function nextEvent(locks: LockService, type: LockEventName): Promise<LockEvent> {
  return new Promise((resolve) => {
    const off = locks.on(type, (e) => {
      off();
      resolve(e);
    });
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------------------------------------------------------------------------------------------
// Test modules for forRootAsync / @InjectLockBackend / isGlobal.

@Injectable()
class AppConfig {
  readonly lockKeyPrefix = 'cfg:';
  readonly lockDefaultBackend = 'a';
}

@Module({ providers: [AppConfig], exports: [AppConfig] })
class ConfigModule {}

@Injectable()
class LockOptionsFactory implements ConfigurableModuleOptionsFactory<LockModuleOptions, 'create'> {
  create(): LockModuleOptions {
    return {
      backends: { a: MEMORY, b: MEMORY },
      defaultBackend: 'a',
      keyPrefix: 'cls:',
    };
  }
}

@Injectable()
class UsesBackendB {
  constructor(@InjectLockBackend('b') readonly locks: LockService) {}
}

@Injectable()
class FeatureService {
  constructor(@Inject(LockService) readonly locks: LockService) {}
}

/** A feature module that does NOT import LockModule. */
@Module({ providers: [FeatureService], exports: [FeatureService] })
class FeatureModule {}

// ---------------------------------------------------------------------------------------------

describe('LockModule.forRoot validation at bootstrap', () => {
  const cases: Array<[string, unknown, string]> = [
    ['no backends', {}, 'backends'],
    ['empty backends object', { backends: {} }, 'backends'],
    ['unknown backend type', { backends: { main: { type: 'nope' } } }, 'backends.main.type'],
    [
      'unknown option on a memory backend',
      { backends: { main: { type: 'memory', foo: 1 } } },
      'backends.main.foo',
    ],
    [
      'several backends without defaultBackend',
      { backends: { a: MEMORY, b: MEMORY } },
      'defaultBackend',
    ],
    [
      'defaultBackend naming a missing backend',
      { backends: { a: MEMORY, b: MEMORY }, defaultBackend: 'c' },
      'defaultBackend',
    ],
    ['defaults.ttl 0', { backends: { main: MEMORY }, defaults: { ttl: 0 } }, 'defaults.ttl'],
    ['defaults.ttl -5', { backends: { main: MEMORY }, defaults: { ttl: -5 } }, 'defaults.ttl'],
    ['defaults.ttl NaN', { backends: { main: MEMORY }, defaults: { ttl: NaN } }, 'defaults.ttl'],
    [
      'defaults.ttl Infinity',
      { backends: { main: MEMORY }, defaults: { ttl: Infinity } },
      'defaults.ttl',
    ],
    [
      'defaults.waitTimeout -1',
      { backends: { main: MEMORY }, defaults: { waitTimeout: -1 } },
      'defaults.waitTimeout',
    ],
    ['keyPrefix non-string', { backends: { main: MEMORY }, keyPrefix: 42 }, 'keyPrefix'],
    [
      'notAcquiredHttpStatus 200',
      { backends: { main: MEMORY }, notAcquiredHttpStatus: 200 },
      'notAcquiredHttpStatus',
    ],
    ['unknown top-level option', { backends: { main: MEMORY }, bogus: true }, 'bogus'],
    ['operationTimeout 0', { backends: { main: MEMORY }, operationTimeout: 0 }, 'operationTimeout'],
    [
      'operationTimeout NaN',
      { backends: { main: MEMORY }, operationTimeout: NaN },
      'operationTimeout',
    ],
  ];

  it.each(cases)('%s rejects app init with LockConfigError', async (_name, opts, field) => {
    const err = await bootstrapError(opts);
    expect(err).toBeInstanceOf(LockConfigError);
    expect(err).toBeInstanceOf(LockError);
    expect(err).toMatchObject({ code: 'LOCK_CONFIG', field });
    expect((err as Error).message).toContain(field);
  });

  it('accepts good configs and the module works with them', async () => {
    const good: LockModuleOptions[] = [
      { backends: { main: MEMORY } },
      { backends: { a: MEMORY, b: MEMORY }, defaultBackend: 'b' },
      {
        backends: { main: MEMORY },
        defaults: { ttl: 1_000, waitTimeout: 0, autoRenew: false },
        keyPrefix: 'p:',
        notAcquiredHttpStatus: false,
      },
      { backends: { main: MEMORY }, defaults: { waitTimeout: Infinity }, keyPrefix: '' },
      { backends: { main: MEMORY }, notAcquiredHttpStatus: 423 },
    ];
    for (const opts of good) {
      const t = await createLockApp(opts);
      try {
        const lock = await t.locks.acquire('good-config');
        try {
          expect(lock.isHeld()).toBe(true);
          expect(lock.backend).toBe(opts.defaultBackend ?? 'main');
          expect(await t.locks.isLocked('good-config')).toBe(true);
        } finally {
          await lock.release();
        }
        expect(await t.locks.isLocked('good-config')).toBe(false);
      } finally {
        await t.close();
      }
    }
  });
});

describe('LockModule.forRootAsync', () => {
  it('useFactory + inject from an imported provider module', async () => {
    const app = await bootstrap([
      LockModule.forRootAsync({
        imports: [ConfigModule],
        inject: [AppConfig],
        useFactory: (cfg: AppConfig): LockModuleOptions => ({
          backends: { a: MEMORY, b: MEMORY },
          defaultBackend: cfg.lockDefaultBackend,
          keyPrefix: cfg.lockKeyPrefix,
        }),
        backendNames: ['a', 'b'],
      }),
    ]);
    try {
      const locks = app.get(LockService);
      const manager = app.get<LockEngine>(LOCK_ENGINE);
      const lock = await locks.acquire('factory-key');
      try {
        // defaultBackend and keyPrefix came from the injected AppConfig.
        expect(lock.backend).toBe('a');
        expect(lock.key).toBe('factory-key');
        expect(await manager.getBackend('a').isLocked('cfg:factory-key')).toBe(true);
        expect(await manager.getBackend('a').isLocked('factory-key')).toBe(false);
      } finally {
        await lock.release();
      }
    } finally {
      await app.close();
    }
  });

  it('useClass', async () => {
    const app = await bootstrap([LockModule.forRootAsync({ useClass: LockOptionsFactory })]);
    try {
      const locks = app.get(LockService);
      const manager = app.get<LockEngine>(LOCK_ENGINE);
      expect(manager.backendNames().sort()).toEqual(['a', 'b']);
      const lock = await locks.acquire('class-key', { backend: 'b' });
      try {
        expect(lock.backend).toBe('b');
        expect(await manager.getBackend('b').isLocked('cls:class-key')).toBe(true);
      } finally {
        await lock.release();
      }
    } finally {
      await app.close();
    }
  });

  it('validates the factory result at bootstrap too', async () => {
    let err: unknown;
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [
          LockModule.forRootAsync({
            useFactory: () => ({ backends: { main: MEMORY }, defaults: { ttl: 0 } }),
          }),
        ],
      }).compile();
      await moduleRef.close();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LockConfigError);
    expect(err).toMatchObject({ field: 'defaults.ttl' });
  });

  it("backendNames expose @InjectLockBackend providers; @InjectLockBackend('b') defaults to b", async () => {
    const app = await bootstrap(
      [
        LockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [AppConfig],
          useFactory: (cfg: AppConfig): LockModuleOptions => ({
            backends: { a: MEMORY, b: MEMORY },
            defaultBackend: cfg.lockDefaultBackend,
          }),
          backendNames: ['a', 'b'],
        }),
      ],
      [UsesBackendB],
    );
    try {
      const locks = app.get(LockService);
      const bLocks = app.get(UsesBackendB).locks;
      expect(bLocks).toBeInstanceOf(LockService);

      const key = 'inject-b-key';
      const lock = await bLocks.acquire(key);
      try {
        expect(lock.backend).toBe('b');
        expect(await locks.isLocked(key, { backend: 'b' })).toBe(true);
        expect(await locks.isLocked(key, { backend: 'a' })).toBe(false);
        // The b-bound service checks b by default; the module default (a) does not see it.
        expect(await bLocks.isLocked(key)).toBe(true);
        expect(await locks.isLocked(key)).toBe(false);
      } finally {
        await lock.release();
      }
      expect(await locks.isLocked(key, { backend: 'b' })).toBe(false);

      // getLockBackendToken('a') resolves via app.get to a LockService bound to 'a'.
      const aLocks = app.get<LockService>(getLockBackendToken('a'));
      expect(aLocks).toBeInstanceOf(LockService);
      const aLock = await aLocks.acquire('token-a-key');
      try {
        expect(aLock.backend).toBe('a');
        expect(await locks.isLocked('token-a-key', { backend: 'a' })).toBe(true);
        expect(await locks.isLocked('token-a-key', { backend: 'b' })).toBe(false);
      } finally {
        await aLock.release();
      }
      expect(app.get<LockService>(getLockBackendToken('b'))).toBeInstanceOf(LockService);
    } finally {
      await app.close();
    }
  });

  it('@InjectLockBackend works whatever the order: a class defined after forRootAsync() ran', async () => {
    // The module is declared first, as when it sits in a file imported before the consumer's.
    const lockModule = LockModule.forRootAsync({
      useFactory: (): LockModuleOptions => ({
        backends: { a: MEMORY, late: MEMORY },
        defaultBackend: 'a',
      }),
    });
    @Injectable()
    class LateConsumer {
      constructor(@InjectLockBackend('late') readonly locks: LockService) {}
    }
    const app = await bootstrap([lockModule], [LateConsumer]);
    try {
      const lock = await app.get(LateConsumer).locks.acquire('late-key');
      try {
        expect(lock.backend).toBe('late');
      } finally {
        await lock.release();
      }
    } finally {
      await app.close();
    }
  });
});

describe('isGlobal', () => {
  it('is global by default: a feature module that does not import LockModule injects LockService', async () => {
    const app = await bootstrap([
      LockModule.forRoot({ backends: { main: MEMORY } }),
      FeatureModule,
    ]);
    try {
      const feature = app.get(FeatureService);
      expect(feature.locks).toBeInstanceOf(LockService);
      expect(feature.locks).toBe(app.get(LockService));
      await feature.locks.withLock('global-key', async (lock) => {
        expect(lock.isHeld()).toBe(true);
      });
    } finally {
      await app.close();
    }
  });

  it('with isGlobal: false, a feature module that does not import LockModule cannot', async () => {
    let err: unknown;
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [
          LockModule.forRoot({ backends: { main: MEMORY }, isGlobal: false }),
          FeatureModule,
        ],
      }).compile();
      await moduleRef.close();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(
      /Nest can't resolve dependencies of (the )?FeatureService/,
    );
  });

  it('with isGlobal: false, the importing module itself still gets LockService', async () => {
    const app = await bootstrap(
      [LockModule.forRoot({ backends: { main: MEMORY }, isGlobal: false })],
      [FeatureService],
    );
    try {
      expect(app.get(FeatureService).locks).toBeInstanceOf(LockService);
    } finally {
      await app.close();
    }
  });
});

describe('shutdown', () => {
  it('releases held locks, cancels waiters and refuses new acquisitions', async () => {
    const t = await createLockApp({ backends: { main: MEMORY } });
    let held: Lock | undefined;
    try {
      const { locks } = t;
      const events = recordEvents(locks, ['released', 'lost']);
      held = await locks.acquire('shutdown-key');
      expect(held.isHeld()).toBe(true);

      const contended = nextEvent(locks, 'contended');
      let ran = false;
      const waiter = locks
        .withLock('shutdown-key', () => {
          ran = true;
        })
        .then(
          () => 'resolved' as const,
          (err: unknown) => err,
        );
      await contended; // the waiter is now queued behind the held lock

      await t.close();

      expect(held.signal.aborted).toBe(true);
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      expect(held.isHeld()).toBe(false);
      expect(events.filter((e) => e.type === 'released')).toEqual([
        expect.objectContaining({
          type: 'released',
          key: 'shutdown-key',
          backend: 'main',
          token: held.token,
        }),
      ]);
      expect(events.filter((e) => e.type === 'lost')).toEqual([]);

      // Shutdown refusals have their own class and code: not to be taken for a store failure.
      const outcome = await waiter;
      expect(outcome).toBeInstanceOf(LockShuttingDownError);
      expect(outcome).not.toBeInstanceOf(LockBackendError);
      expect(outcome).toMatchObject({ code: 'LOCK_SHUTTING_DOWN', backend: 'main' });
      expect(ran).toBe(false);

      await expect(locks.acquire('after-close')).rejects.toBeInstanceOf(LockShuttingDownError);
      await expect(locks.tryAcquire('after-close')).rejects.toBeInstanceOf(LockShuttingDownError);
      // Releasing a lock the shutdown already released stays a no-op.
      await expect(held.release()).resolves.toBeUndefined();
    } finally {
      await t.close();
    }
  });
});

describe('events and metrics', () => {
  it('emits acquired/contended/released with the right payloads and counts metrics', async () => {
    const t = await createLockApp({ backends: { main: MEMORY }, keyPrefix: 'app:' });
    try {
      const { locks, manager } = t;
      const events = recordEvents(locks, ['acquired', 'contended', 'released', 'lost', 'error']);

      // 1. acquire
      const first = await locks.acquire('ev');
      expect(await manager.getBackend('main').isLocked('app:ev')).toBe(true);
      expect(events).toEqual([
        {
          type: 'acquired',
          key: 'ev',
          backend: 'main',
          token: first.token,
          fence: first.fence,
          waitedMs: expect.any(Number),
        },
      ]);
      expect(first.fence).toEqual(expect.any(Number));

      // 2. tryAcquire while busy: contended, null
      expect(await locks.tryAcquire('ev')).toBeNull();
      expect(events[1]).toEqual({
        type: 'contended',
        key: 'ev',
        backend: 'main',
        token: expect.any(String),
        waitedMs: expect.any(Number),
      });
      expect(events[1].token).not.toBe(first.token);

      // 3. a waiting acquire, granted when the first lock is released
      const contended = nextEvent(locks, 'contended');
      const secondP = locks.acquire('ev', { waitTimeout: 5_000 });
      await contended;
      await delay(50);
      await first.release();
      const second = await secondP;
      await second.release();

      // Order between the holder's `released` and the waiter's `acquired` is not part of the
      // contract (the memory backend hands the lock over inside the release), so find by token.
      expect(events).toHaveLength(6);
      const find = (type: LockEventName, token: string): LockEvent | undefined =>
        events.find((e) => e.type === type && e.token === token);
      const waitContended = find('contended', second.token);
      const released1 = find('released', first.token);
      const acquired2 = find('acquired', second.token);
      const released2 = find('released', second.token);
      expect(events.indexOf(released2 as LockEvent)).toBe(5);
      expect(waitContended).toMatchObject({ type: 'contended', key: 'ev', token: second.token });
      expect(released1).toEqual({
        type: 'released',
        key: 'ev',
        backend: 'main',
        token: first.token,
        fence: first.fence,
        heldMs: expect.any(Number),
      });
      expect(released1?.heldMs).toBeGreaterThanOrEqual(40);
      expect(acquired2).toEqual({
        type: 'acquired',
        key: 'ev',
        backend: 'main',
        token: second.token,
        fence: second.fence,
        waitedMs: expect.any(Number),
      });
      expect(acquired2?.waitedMs).toBeGreaterThanOrEqual(40);
      expect(second.fence).toBeGreaterThan(first.fence as number);
      expect(released2).toMatchObject({ type: 'released', key: 'ev', token: second.token });
      expect(events.every((e) => !e.key.startsWith('app:'))).toBe(true);

      // 4. a re-entrant withLock
      await locks.withLock('re', async () => {
        await locks.withLock('re', async (inner) => {
          expect(inner.isHeld()).toBe(true);
        });
      });

      const metrics = locks.getMetrics();
      expect(Object.keys(metrics)).toEqual(['main']);
      expect(metrics.main).toEqual({
        lock_acquire_attempts_total: 4, // acquire, tryAcquire, waiting acquire, outer withLock
        lock_acquired_total: 3,
        lock_not_acquired_total: 1,
        lock_lost_total: 0,
        lock_reentered_total: 1,
        lock_held: 0,
        lock_wait_seconds: { sum: expect.any(Number), count: 4 },
        lock_hold_seconds: { sum: expect.any(Number), count: 3 },
      });
      expect(metrics.main.lock_wait_seconds.sum).toBeGreaterThanOrEqual(0.04);
      expect(metrics.main.lock_hold_seconds.sum).toBeGreaterThanOrEqual(0.04);
      expect(events.filter((e) => e.type === 'lost' || e.type === 'error')).toEqual([]);
    } finally {
      await t.close();
    }
  });
});

describe('optional peer packages', () => {
  it('a missing package is a LockConfigError naming the package and the install command', async () => {
    let err: unknown;
    try {
      await loadOptionalPackage(
        'definitely-not-installed-pkg-xyz',
        'backends.main',
        'the redis backend',
        'Redis',
      );
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LockConfigError);
    expect(err).toMatchObject({ code: 'LOCK_CONFIG', field: 'backends.main' });
    const message = (err as Error).message;
    expect(message).toContain('definitely-not-installed-pkg-xyz');
    expect(message).toContain('npm install definitely-not-installed-pkg-xyz');
    expect(message).toContain('the redis backend');
  });

  it('resolves a package that is installed', async () => {
    const rxjs = await loadOptionalPackage<{ of?: unknown }>(
      'rxjs',
      'backends.main',
      'a test',
      'of',
    );
    expect(typeof rxjs.of).toBe('function');
  });
});
