/**
 * Runs in a process of its own (see probe.ts): boots a Nest app (default logger on, so every
 * log line is captured) with one backend configured from the JSON argument, drives every public
 * call against it, and prints `util.inspect` of every error at full depth (hidden fields too).
 * The parent greps everything this process wrote for the sentinel secret.
 */
import 'reflect-metadata';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import type { LockBackendConfig } from '../../lib/backends/backend-config';

interface ProbeArgs {
  config: LockBackendConfig;
  /** Bound on each call, ms (a store that hangs must not hang the probe). */
  operationTimeout: number;
  /** Module (from the repo root) whose default export builds the app's config from `config`. */
  setup?: string;
}

const args = JSON.parse(process.argv[2]) as ProbeArgs;

/** One line per outcome, with the error inspected at full depth. */
function report(what: string, outcome: unknown): void {
  const text = inspect(outcome, { depth: Infinity, showHidden: true });
  process.stdout.write(`PROBE ${what}: ${text}\n`);
  if (outcome instanceof Error) {
    const code = (outcome as { code?: unknown }).code;
    process.stdout.write(`PROBE-CODE ${what}: ${String(code)}\n`);
  }
}

async function attempt(what: string, call: () => Promise<unknown>): Promise<void> {
  try {
    report(what, await call());
  } catch (err) {
    report(what, err);
  }
}

async function main(): Promise<void> {
  let config = args.config;
  if (args.setup) {
    const { default: build } = (await import(join(process.cwd(), args.setup))) as {
      default: (config: LockBackendConfig) => LockBackendConfig | Promise<LockBackendConfig>;
    };
    config = await build(config);
  }

  @Module({
    imports: [
      LockModule.forRoot({
        backends: { probe: config },
        operationTimeout: args.operationTimeout,
      }),
    ],
  })
  class ProbeModule {}

  let app;
  try {
    app = await NestFactory.createApplicationContext(ProbeModule, { abortOnError: false });
  } catch (err) {
    report('bootstrap', err);
    return;
  }
  const locks = app.get(LockService);
  await attempt('acquire', () => locks.acquire('probe-key', { waitTimeout: 500 }));
  await attempt('tryAcquire', () => locks.tryAcquire('probe-key'));
  await attempt('withLock', () => locks.withLock('probe-key', () => 'ran', { waitTimeout: 500 }));
  await attempt('isLocked', () => locks.isLocked('probe-key'));
  await attempt('inspect', () => locks.inspect('probe-key'));
  await attempt('forceRelease', () => locks.forceRelease('probe-key'));
  await attempt('health', () => locks.health({ timeout: 2_000 }));
  await attempt('close', () => app.close());
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    report('probe', err);
    process.exit(0);
  },
);
