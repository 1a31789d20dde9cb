// The compatibility battery's app: a plain NestJS HTTP app as a user would write it, built in a
// fresh folder against the NestJS major under test. PLATFORM=express|fastify picks the adapter.
// Prints one JSON line `{ "port": N }` once it listens. SHUTDOWN=hooks: SIGTERM goes through
// `enableShutdownHooks()` (Nest closes the app, then re-raises the signal); SHUTDOWN=close: the
// handler only calls `app.close()`, so the process exits (code 0) only once every socket and
// timer the app owned is closed.
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  const logger = ['error', 'warn'] as const;
  const app =
    process.env.PLATFORM === 'fastify'
      ? await NestFactory.create<NestFastifyApplication>(AppModule, new FastifyAdapter(), {
          logger: [...logger],
        })
      : await NestFactory.create(AppModule, { logger: [...logger] });
  if (process.env.SHUTDOWN === 'close') {
    process.once('SIGTERM', () => void app.close());
  } else {
    app.enableShutdownHooks();
  }
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  console.log(JSON.stringify({ port }));
}

void bootstrap();
