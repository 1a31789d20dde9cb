/**
 * A worker process of the chaos matrix's sharing rows: a Nest application context with
 * `LockModule.forRoot(options)` that takes one key in a loop with its own `mode` and `permits`,
 * holds it a short random time while it keeps checking `lock.isHeld()`, and releases it. Each
 * hold is appended to `historyFile` as it happens (a killed worker's last grant is on disk):
 * `{"ev":"acq","token","mode","permits","permit","fence","t"}` right after the grant, and
 * `{"ev":"end","token","t"}` at the last moment the holder saw it held (before its release is
 * sent, or when it noticed the loss). `t` is `process.hrtime.bigint()` as a decimal string.
 *
 * The victim (`strikeHoldMs` set) holds its first grant that long and prints `holding`, so the
 * nemesis strikes while it holds.
 *
 * Run: node -r scripts/ts-register.cjs test/chaos/sharing-worker.ts '<SharingWorkerArgs JSON>'
 */
import 'reflect-metadata';
import { appendFileSync, existsSync } from 'node:fs';
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import type { SharingRequest } from './sharing-scenarios';

/** What the runner passes, as one JSON argument. */
export interface SharingWorkerArgs {
  worker: string;
  options: LockModuleOptions;
  key: string;
  request: SharingRequest;
  ttl: number;
  waitTimeout: number;
  /** Longest random hold of a normal grant, ms. */
  holdMs: number;
  /** Victim only: its first grant lasts this long and is announced. */
  strikeHoldMs?: number;
  historyFile: string;
  /** Start barrier: the worker waits for this file. */
  goFile: string;
  /** The worker finishes its current hold and exits once this file exists. */
  stopFile: string;
}

/** One line of a sharing history, as written. */
export type SharingHistoryLine =
  | {
      ev: 'acq';
      worker: string;
      token: string;
      mode: SharingRequest['mode'];
      permits: number;
      permit: number;
      fence: number | null;
      t: string;
    }
  | { ev: 'end'; worker: string; token: string; t: string };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(args: SharingWorkerArgs): Promise<void> {
  const record = (line: SharingHistoryLine): void =>
    appendFileSync(args.historyFile, `${JSON.stringify(line)}\n`);
  const now = (): string => process.hrtime.bigint().toString();

  @Module({ imports: [LockModule.forRoot(args.options)] })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error'] });
  const locks = app.get(LockService);
  process.stdout.write('ready\n');
  while (!existsSync(args.goFile)) await sleep(5);

  let strikePending = args.strikeHoldMs !== undefined;
  const errors: Record<string, number> = {};
  while (!existsSync(args.stopFile)) {
    try {
      const lock = await locks.acquire(args.key, {
        ...args.request,
        ttl: args.ttl,
        waitTimeout: args.waitTimeout,
      });
      const { token } = lock;
      record({
        ev: 'acq',
        worker: args.worker,
        token,
        ...args.request,
        permit: lock.permit,
        fence: lock.fence,
        t: now(),
      });
      let lastHeld = now();
      const work = strikePending ? args.strikeHoldMs! : Math.random() * args.holdMs;
      if (strikePending) process.stdout.write(`holding ${lock.permit}\n`);
      strikePending = false;
      const until = performance.now() + work;
      while (performance.now() < until && lock.isHeld()) {
        lastHeld = now();
        await sleep(Math.min(10, Math.max(0, until - performance.now())));
      }
      if (lock.isHeld()) lastHeld = now();
      record({ ev: 'end', worker: args.worker, token, t: lastHeld });
      await lock.release();
    } catch (err) {
      const name = (err as Error)?.name ?? 'Error';
      // Each kind of error once, whole (with its cause), so a report can say what it was.
      if (errors[name] === undefined) process.stderr.write(`${describeError(err)}\n`);
      errors[name] = (errors[name] ?? 0) + 1;
      // A request the backend cannot grant is a harness error, not something to retry.
      if (name === 'LockConfigError') throw err;
      await sleep(20);
    }
  }
  await app.close();
  process.stdout.write(`done ${JSON.stringify({ errors })}\n`);
}

/** An error's stack, then its `cause` chain's, for stderr. */
function describeError(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e !== undefined && parts.length < 5; e = (e as Error)?.cause) {
    parts.push((e as Error)?.stack ?? String(e));
  }
  return parts.join('\ncaused by: ');
}

main(JSON.parse(process.argv[2]) as SharingWorkerArgs).catch((err: unknown) => {
  process.stderr.write(`${describeError(err)}\n`);
  process.exit(1);
});
