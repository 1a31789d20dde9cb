import { type DynamicModule, Module } from '@nestjs/common';
import type { LockEngine } from '../core/engine/lock-engine';
import { LOCK_ENGINE } from '../lock.constants';
import { LockModule } from '../lock.module';
import type { LockModuleOptions } from '../lock.module-options';
import { LockTesting } from './lock-testing';

/**
 * `LockModule` for tests: takes the application's own `LockModule` options (or none) and puts
 * every named backend on an in-memory store of its own (`type: 'testing'`), so the code under
 * test runs unchanged without a server; provides {@link LockTesting} to stage other instances
 * and store failures. Works with Jest's fake timers (leases follow the faked clock).
 */
@Module({})
export class LockTestingModule {
  /** The module; `options` as `LockModule.forRoot` takes them (default: one backend, `default`). */
  static forRoot(options?: Partial<LockModuleOptions>): DynamicModule {
    const names = Object.keys(options?.backends ?? { default: null });
    const backends = Object.fromEntries(names.map((name) => [name, { type: 'testing' }]));
    const lockModule = LockModule.forRoot({ ...options, backends } as LockModuleOptions);
    return {
      module: LockTestingModule,
      global: true,
      imports: [lockModule],
      providers: [
        {
          provide: LockTesting,
          useFactory: (engine: LockEngine) => LockTesting.of(engine),
          inject: [LOCK_ENGINE],
        },
      ],
      exports: [lockModule, LockTesting],
    };
  }
}
