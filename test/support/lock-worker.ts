/**
 * A lock-contending worker process for multi-process exclusion tests. It boots a real Nest
 * application context with `LockModule.forRoot(options)`, waits for a start barrier, then runs
 * `rounds` critical sections on `key`, each a read -> random sleep -> write of a witness
 * counter file, recording everything with `HistoryRecorder` for `checkHistory`.
 *
 * `via` picks `@Locked` (default) or `withLock`.
 *
 * Run: node -r scripts/ts-register.cjs test/support/lock-worker.ts '<WorkerArgs JSON>'
 */
import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import { Locked } from '../../lib/decorators/locked.decorator';
import type { Lock } from '../../lib/lock.interfaces';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { HistoryRecorder } from './history';
import { readWitness, writeWitness } from './witness-file';

/** What the parent passes (as one JSON argument). */
export interface WorkerArgs {
  worker: string;
  options: LockModuleOptions;
  key: string;
  rounds: number;
  /** Max random sleep inside the critical section, ms. */
  holdMs: number;
  ttl?: number;
  historyFile: string;
  witnessFile: string;
  /** The worker prints "ready" and starts once this file exists. */
  goFile: string;
  /** Enter the critical section through `@Locked` (default) or `LockService.withLock`. */
  via?: 'decorator' | 'withLock';
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(args: WorkerArgs): Promise<void> {
  @Module({ imports: [LockModule.forRoot(args.options)] })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, {
    logger: ['error', 'warn'],
  });
  const locks = app.get(LockService);
  const recorder = new HistoryRecorder(args.historyFile, args.worker);
  const lockOptions = { waitTimeout: Infinity, ...(args.ttl ? { ttl: args.ttl } : {}) };

  /** One critical section on the witness counter, recorded as the checker expects. */
  const criticalSection = async (lock: Lock): Promise<void> => {
    recorder.acq(args.key, lock.token, lock.fence);
    let releasing = false;
    lock.signal.addEventListener('abort', () => {
      if (!releasing) recorder.lost(args.key, lock.token, String(lock.signal.reason));
    });
    const read = readWitness(args.witnessFile);
    await sleep(Math.random() * args.holdMs);
    writeWitness(args.witnessFile, read + 1);
    recorder.witness(args.key, lock.token, read, read + 1);
    releasing = true;
    recorder.rel(args.key, lock.token);
  };

  // The decorator path is what applications use: a plain class, no DI needed for @Locked.
  class Counter {
    @Locked('{0}', lockOptions)
    async increment(_key: string): Promise<void> {
      await criticalSection(locks.current()!);
    }
  }
  const counter = new Counter();

  process.stdout.write('ready\n');
  while (!existsSync(args.goFile)) await sleep(5);

  for (let round = 0; round < args.rounds; round++) {
    if (args.via === 'withLock') await locks.withLock(args.key, criticalSection, lockOptions);
    else await counter.increment(args.key);
  }
  recorder.close();
  await app.close();
}

main(JSON.parse(process.argv[2]) as WorkerArgs).catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
