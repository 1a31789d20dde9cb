import {
  type BeforeApplicationShutdown,
  type DynamicModule,
  Inject,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule, DiscoveryService, ModuleRef } from '@nestjs/core';
import { LockManager } from './core/lock-manager';
import { buildLockRuntime } from './core/module-options';
import { LockNotAcquiredInterceptor } from './http/lock-not-acquired.interceptor';
import { getLockBackendToken, LOCK_MANAGER } from './lock.constants';
import {
  LOCK_ASYNC_OPTIONS_TYPE,
  LOCK_MODULE_OPTIONS,
  LOCK_OPTIONS_TYPE,
  LockConfigurableModule,
} from './lock.module-definition';
import { LockService } from './lock.service';
import {
  hasLockedMethods,
  lockBindings,
  LockServiceHolder,
  type LockBinding,
} from './lock-service.holder';
import { requestedBackendNames } from './decorators/inject-lock-backend.decorator';

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
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown
{
  /** What this module's `@Locked` instances use; its service is cleared at shutdown. */
  private readonly binding: LockBinding = {};

  /** @internal Nest creates the module; its dependencies are the module's own internals. */
  constructor(
    @Inject(LOCK_MANAGER) private readonly manager: LockManager,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
  ) {
    super();
  }

  /** Configures the module with static options. */
  static override forRoot(options: typeof LOCK_OPTIONS_TYPE): DynamicModule {
    return withProviders(super.forRoot(options), Object.keys(options.backends ?? {}));
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
    const service = new LockService(this.manager);
    this.binding.service = service;
    LockServiceHolder.service = service;
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      // Request-scoped and transient instances do not exist yet: they use the holder.
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) continue;
      const instance: unknown = wrapper.instance;
      if (typeof instance === 'object' && instance !== null && hasLockedMethods(instance)) {
        lockBindings.set(instance, this.binding);
      }
    }
  }

  /**
   * Stops new acquisitions, lets in-flight locked work finish or aborts it (option
   * `shutdown`), and releases held locks while clients are still open.
   */
  async beforeApplicationShutdown(): Promise<void> {
    try {
      // In-flight work may still re-enter its locks through @Locked meanwhile.
      await this.manager.beforeShutdown();
    } finally {
      if (LockServiceHolder.service === this.binding.service) LockServiceHolder.service = undefined;
      this.binding.service = undefined;
    }
  }

  /** Closes the clients the module created (never ones the user passed in). */
  async onApplicationShutdown(): Promise<void> {
    await this.manager.close();
  }
}

function withProviders(base: DynamicModule, names: readonly string[]): DynamicModule {
  const backendNames = [...new Set([...names, ...requestedBackendNames()])];
  const providers: Provider[] = [
    {
      provide: LOCK_MANAGER,
      useFactory: async (options: unknown, moduleRef: ModuleRef) => {
        const { settings, backends } = await buildLockRuntime(options, {
          // Lazily, and across modules: e.g. the DataSource of @nestjs/typeorm.
          resolve: (token) => moduleRef.get(token as string, { strict: false }),
        });
        return new LockManager(backends, settings);
      },
      inject: [LOCK_MODULE_OPTIONS, ModuleRef],
    },
    {
      provide: LockService,
      useFactory: (manager: LockManager) => new LockService(manager),
      inject: [LOCK_MANAGER],
    },
    ...backendNames.map((name): Provider => ({
      provide: getLockBackendToken(name),
      useFactory: (manager: LockManager) => {
        // A name the user listed must exist: LockConfigError at bootstrap, not at first use.
        // Names only seen on @InjectLockBackend fail on use, with the same error.
        if (names.includes(name)) manager.getBackend(name);
        return new LockService(manager, name);
      },
      inject: [LOCK_MANAGER],
    })),
    { provide: APP_INTERCEPTOR, useClass: LockNotAcquiredInterceptor },
  ];
  return {
    ...base,
    // DiscoveryService: to bind this application's @Locked instances to this module.
    imports: [...(base.imports ?? []), DiscoveryModule],
    providers: [...(base.providers ?? []), ...providers],
    exports: [
      ...(base.exports ?? []),
      LOCK_MANAGER,
      LockService,
      ...backendNames.map(getLockBackendToken),
    ],
  };
}
