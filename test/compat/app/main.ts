// The compatibility battery's app: a plain NestJS HTTP app as a user would write it, built in a
// fresh folder against the NestJS major under test. PLATFORM=express|fastify picks the adapter;
// LOCK_WIRING=url (default)|client|redlock the root module: the README's example
// (app.module.ts) or one of wired-app.module.ts (see LockWiring in ../cells.ts). Prints one
// JSON line `{ "port": N, "wiring": W }` once it listens. SHUTDOWN=hooks: SIGTERM goes through
// `enableShutdownHooks()` (Nest closes the app, then re-raises the signal); SHUTDOWN=close: the
// handler only calls `app.close()`, so the process exits (code 0) only once every socket and
// timer the app owned is closed.
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';
import { ClientAppModule, RedlockAppModule } from './wired-app.module.js';

const ROOT_MODULES = { url: AppModule, client: ClientAppModule, redlock: RedlockAppModule };

async function bootstrap(): Promise<void> {
  const logger = ['error', 'warn'] as const;
  const wiring = process.env.LOCK_WIRING ?? 'url';
  if (!(wiring in ROOT_MODULES)) throw new Error(`LOCK_WIRING=${wiring}: not url|client|redlock`);
  const root = ROOT_MODULES[wiring as keyof typeof ROOT_MODULES];
  const app =
    process.env.PLATFORM === 'fastify'
      ? await NestFactory.create<NestFastifyApplication>(root, new FastifyAdapter(), {
          logger: [...logger],
        })
      : await NestFactory.create(root, { logger: [...logger] });
  if (process.env.SHUTDOWN === 'close') {
    process.once('SIGTERM', () => void app.close());
  } else {
    app.enableShutdownHooks();
  }
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  console.log(JSON.stringify({ port, wiring }));
}

void bootstrap();
