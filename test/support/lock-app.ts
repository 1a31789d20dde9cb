import 'reflect-metadata';
import type { DynamicModule, INestApplication, Provider, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import { LOCK_ENGINE } from '../../lib/lock.constants';
import type { LockEngine } from '../../lib/core/engine/lock-engine';
import type { LockModuleOptions } from '../../lib/lock.module-options';

/** A bootstrapped app with the lock module, for integration tests. */
export interface LockTestApp {
  app: INestApplication;
  locks: LockService;
  manager: LockEngine;
  /** Closes the app (releases held locks, closes backends). Safe to call twice. */
  close(): Promise<void>;
}

/** Extra module parts for a test app. */
export interface LockTestAppExtras {
  imports?: Array<Type<unknown> | DynamicModule>;
  providers?: Provider[];
  controllers?: Type<unknown>[];
}

/**
 * Builds and initialises a real Nest application with `LockModule.forRoot(options)` (an
 * HTTP-capable app, so route tests can `listen(0)` on it).
 */
export async function createLockApp(
  options: LockModuleOptions,
  extra: LockTestAppExtras = {},
): Promise<LockTestApp> {
  const moduleRef = await Test.createTestingModule({
    imports: [LockModule.forRoot(options), ...(extra.imports ?? [])],
    providers: extra.providers ?? [],
    controllers: extra.controllers ?? [],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  let closed: Promise<void> | undefined;
  return {
    app,
    locks: app.get(LockService),
    manager: app.get<LockEngine>(LOCK_ENGINE),
    close: () => (closed ??= app.close()),
  };
}
