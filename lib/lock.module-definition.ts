import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { LockModuleOptions } from './lock.module-options';

/** Extras accepted by `forRoot`/`forRootAsync` next to the options. */
export interface LockModuleExtras {
  /** Register the module globally (default `true`). */
  isGlobal: boolean;
  /**
   * `forRootAsync` only: backend names to expose as `@InjectLockBackend(name)` providers, since
   * the factory's options are not known when the module is declared. Names used with
   * `@InjectLockBackend` are added automatically.
   */
  backendNames: string[];
}

export const {
  ConfigurableModuleClass: LockConfigurableModule,
  MODULE_OPTIONS_TOKEN: LOCK_MODULE_OPTIONS,
  OPTIONS_TYPE: LOCK_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: LOCK_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<LockModuleOptions>({ moduleName: 'Lock' })
  .setClassMethodName('forRoot')
  .setExtras<LockModuleExtras>({ isGlobal: true, backendNames: [] }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
