/**
 * A process that takes one lock and keeps it (renewing) until it is killed: the victim of
 * crash and pause fault tests. Prints one JSON line `{"token":…,"fence":…}` once it holds.
 *
 * Run: node -r scripts/ts-register.cjs test/support/hold-worker.ts '<HoldArgs JSON>'
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import type { LockModuleOptions } from '../../lib/lock.module-options';

/** What the parent passes. */
export interface HoldArgs {
  options: LockModuleOptions;
  key: string;
  ttl: number;
  /** How the lock shares its key (default: a mutex). */
  mode?: 'exclusive' | 'shared';
  permits?: number;
}

async function main(args: HoldArgs): Promise<void> {
  @Module({ imports: [LockModule.forRoot(args.options)] })
  class HoldModule {}
  const app = await NestFactory.createApplicationContext(HoldModule, { logger: ['error', 'warn'] });
  const lock = await app.get(LockService).acquire(args.key, {
    ttl: args.ttl,
    waitTimeout: 10_000,
    ...(args.mode ? { mode: args.mode } : {}),
    ...(args.permits ? { permits: args.permits } : {}),
  });
  process.stdout.write(
    `${JSON.stringify({ token: lock.token, fence: lock.fence, permit: lock.permit })}\n`,
  );
  // Stay alive (the lock's timers do not keep the process up by design).
  setInterval(() => undefined, 1_000);
}

main(JSON.parse(process.argv[2]) as HoldArgs).catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
