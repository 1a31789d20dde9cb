import 'reflect-metadata';
import { Module, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule, LockService, type LockModuleOptions } from '../../lib';

/** A Nest application context with the lock module, as a user's service would have it. */
export interface BenchLocks {
  locks: LockService;
  get<T>(type: Type<T>): T;
  close(): Promise<void>;
}

/** Boots `LockModule.forRoot(options)` (plus `providers`) in a plain application context. */
export async function startLocks(
  options: LockModuleOptions,
  providers: Provider[] = [],
): Promise<BenchLocks> {
  @Module({})
  class BenchModule {
    static with(): DynamicModule {
      return { module: BenchModule, imports: [LockModule.forRoot(options)], providers };
    }
  }
  const app = await NestFactory.createApplicationContext(BenchModule.with(), {
    logger: false,
    // A module that fails to boot (server down) must throw here, not exit the process silently.
    abortOnError: false,
  });
  return {
    locks: app.get(LockService),
    get: (type) => app.get(type),
    close: () => app.close(),
  };
}
