import {
  type BeforeApplicationShutdown,
  type DynamicModule,
  Inject,
  Module,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule, DiscoveryService, ModuleRef } from '@nestjs/core';
import { BACKEND_TYPES } from './backends/backend-types';
import { LockEngine } from './core/engine/lock-engine';
import { LockConfigError } from './errors/lock.errors';
import { buildLockRuntime } from './core/settings/module-options';
import { copyOwnOptions, readOption } from './core/shared/options';
import { HTTP_OPTION_KEYS, LOCK_HTTP_SETTINGS, readHttpSettings } from './http/http-settings';
import { LockErrorsInterceptor } from './http/lock-errors.interceptor';
import { getLockBackendToken, LOCK_ENGINE } from './lock.constants';
import {
  LOCK_ASYNC_OPTIONS_TYPE,
  LOCK_MODULE_OPTIONS,
  LOCK_OPTIONS_TYPE,
  LockConfigurableModule,
} from './lock.module-definition';
import { LockService } from './lock.service';
import {
  hasLockedMethods,
  lockedDeclarations,
  lockBindings,
  LockServiceHolder,
  type LockBinding,
} from './lock-service.holder';
import { requestedBackendNames } from './decorators/inject-lock-backend.decorator';
import { LeaderService } from './leader/leader.service';
import { LEADER_OPTION_KEYS, leaderIdOf } from './leader/leader-id';
import { startLeaderCampaigns } from './leader/leader-bootstrap';

/**
 * The distributed-lock module. `LockModule.forRoot({ backends: { main: { type: 'redis', url } } })`
 * or `forRootAsync({ useFactory, inject })`; global unless `isGlobal: false`. Provides
 * `LockService` and one `LockService` per backend (`@InjectLockBackend(name)`), wires
 * `@Locked`, maps busy locks on HTTP routes to 409, and on shutdown releases held locks
 * before closing the clients it created.
 */
@Module({})
export class LockModule
  extends LockConfigurableModule
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  /** What this module's `@Locked` instances use; its service is cleared at shutdown. */
  private readonly binding: LockBinding = {};

  /** @internal Nest creates the module; its dependencies are the module's own internals. */
  constructor(
    @Inject(LOCK_ENGINE) private readonly engine: LockEngine,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(LeaderService) private readonly leaders: LeaderService,
  ) {
    super();
  }

  /** Configures the module with static options. */
  static override forRoot(options: typeof LOCK_OPTIONS_TYPE): DynamicModule {
    // Nest copies the options by assignment (a getter runs, an own __proto__ becomes the
    // prototype): copy them first, refusing what cannot be copied, with LockConfigError.
    const copy = copyOwnOptions(options, 'options', '') as unknown as typeof LOCK_OPTIONS_TYPE;
    const backends = readOption('backends', () => Object.keys(copy.backends ?? {}));
    return withProviders(super.forRoot(copy), backends);
  }

  /** Configures the module from a factory, class or existing provider. */
  static override forRootAsync(options: typeof LOCK_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withProviders(super.forRootAsync(options), options.backendNames ?? []);
  }

  /**
   * Makes `@Locked` usable; until now it refuses to run. Binds every instance of this
   * application that has `@Locked` methods to this module (see `LockServiceHolder`).
   */
  onModuleInit(): void {
    const service = LockService.of(this.engine);
    this.binding.service = service;
    this.binding.leaders = this.leaders;
    LockServiceHolder.service = service;
    LockServiceHolder.leaders = this.leaders;
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      // Request-scoped and transient instances do not exist yet: they use the holder.
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) continue;
      const instance: unknown = wrapper.instance;
      if (typeof instance === 'object' && instance !== null && hasLockedMethods(instance)) {
        lockBindings.set(instance, this.binding);
      }
    }
    this.checkDeclarations();
  }

  /**
   * Refuses to start when a `@Locked` method of this application asks for what its backend
   * cannot grant (`mode: 'shared'` or `permits` on a mutex-only backend such as Redlock, an
   * unknown backend): at bootstrap, naming the method, instead of at its first call.
   */
  private checkDeclarations(): void {
    const seen = new Set<unknown>();
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      // Every class, request-scoped and transient ones included: their prototypes are known.
      const type: unknown = wrapper.metatype;
      if (typeof type !== 'function' || seen.has(type)) continue;
      seen.add(type);
      for (const { where, options } of lockedDeclarations(type.prototype as object)) {
        if (options.mode === undefined && options.permits === undefined) continue;
        try {
          this.engine.checkGrantable(options);
        } catch (err) {
          if (err instanceof LockConfigError)
            throw new LockConfigError(err.field, err.detail, where);
          throw err;
        }
      }
    }
  }

  /** Starts campaigning for every `@Leader` provider and `@LeaderOnly` name of the application. */
  onApplicationBootstrap(): void {
    startLeaderCampaigns(this.leaders, [
      ...this.discovery.getProviders(),
      ...this.discovery.getControllers(),
    ]);
  }

  /**
   * Resigns every leadership the module campaigns for (the next candidates lead at once), stops
   * new acquisitions, lets in-flight locked work finish or aborts it (option `shutdown`), and
   * releases held locks while clients are still open.
   */
  async beforeApplicationShutdown(): Promise<void> {
    try {
      await this.leaders.shutdown();
      // In-flight work may still re-enter its locks through @Locked meanwhile.
      await this.engine.beforeShutdown();
    } finally {
      if (LockServiceHolder.service === this.binding.service) LockServiceHolder.service = undefined;
      if (LockServiceHolder.leaders === this.leaders) LockServiceHolder.leaders = undefined;
      this.binding.service = undefined;
      this.binding.leaders = undefined;
    }
  }

  /** Closes the clients the module created (never ones the user passed in). */
  async onApplicationShutdown(): Promise<void> {
    await this.engine.close();
  }
}

/**
 * Adds the module's providers to `base`. They are computed when Nest reads them (it scans
 * modules when the application is created, after every class is defined), so backend names
 * requested with `@InjectLockBackend` are included whatever the order of imports.
 */
function withProviders(base: DynamicModule, names: readonly string[]): DynamicModule {
  const backendNames = (): string[] => [...new Set([...names, ...requestedBackendNames()])];
  const module: DynamicModule = {
    ...base,
    // DiscoveryService: to bind this application's @Locked instances to this module.
    imports: [...(base.imports ?? []), DiscoveryModule],
  };
  Object.defineProperties(module, {
    providers: {
      enumerable: true,
      get: (): Provider[] => [...(base.providers ?? []), ...providers(names, backendNames())],
    },
    exports: {
      enumerable: true,
      get: () => [
        ...(base.exports ?? []),
        LOCK_ENGINE,
        LockService,
        LeaderService,
        ...backendNames().map(getLockBackendToken),
      ],
    },
  });
  return module;
}

/** The engine, the services (default and per backend) and the HTTP mapping. */
function providers(configured: readonly string[], backendNames: readonly string[]): Provider[] {
  return [
    {
      // Validated first (the engine depends on it), so a bad status fails before any I/O.
      provide: LOCK_HTTP_SETTINGS,
      useFactory: (options: unknown) => readHttpSettings(options),
      inject: [LOCK_MODULE_OPTIONS],
    },
    {
      provide: LOCK_ENGINE,
      useFactory: async (options: unknown, moduleRef: ModuleRef) => {
        const { settings, backends } = await buildLockRuntime(options, {
          types: BACKEND_TYPES,
          // Lazily, and across modules: e.g. the DataSource of @nestjs/typeorm.
          resolve: (token) => moduleRef.get(token as string, { strict: false }),
          foreignKeys: [...HTTP_OPTION_KEYS, ...LEADER_OPTION_KEYS],
        });
        return new LockEngine(backends, settings);
      },
      inject: [LOCK_MODULE_OPTIONS, ModuleRef, LOCK_HTTP_SETTINGS],
    },
    {
      provide: LockService,
      useFactory: (engine: LockEngine) => LockService.of(engine),
      inject: [LOCK_ENGINE],
    },
    {
      provide: LeaderService,
      useFactory: (engine: LockEngine, options: unknown) =>
        LeaderService.of(engine, leaderIdOf(options)),
      inject: [LOCK_ENGINE, LOCK_MODULE_OPTIONS],
    },
    ...backendNames.map((name): Provider => ({
      provide: getLockBackendToken(name),
      useFactory: (engine: LockEngine) => {
        // A name the user listed must exist: LockConfigError at bootstrap, not at first use.
        // Names only seen on @InjectLockBackend fail on use, with the same error.
        if (configured.includes(name)) engine.getBackend(name);
        return LockService.of(engine, name);
      },
      inject: [LOCK_ENGINE],
    })),
    { provide: APP_INTERCEPTOR, useClass: LockErrorsInterceptor },
  ];
}
