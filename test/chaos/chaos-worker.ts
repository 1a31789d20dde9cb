/**
 * A chaos worker process: a real Nest application context with `LockModule.forRoot(options)`
 * whose service method is decorated with `@Locked`. Each critical section does a fenced write
 * (to the runner's fenced resource), a read of the unfenced witness counter, some work while it
 * keeps checking `lock.isHeld()`, a second fenced write made without looking (a holder that lost
 * its lock unnoticed writes late: the fence must stop it), and, only while it still holds, the
 * witness write. Everything is recorded for `checkHistory`.
 *
 * A hold ends, for the checker, at the worker's last observation that `isHeld()` was true: the
 * harness judges the intervals in which a holder could act on its belief (a paused process that
 * wakes up past its lease does nothing more than the fenced write).
 *
 * The victim (`strikeHoldMs` set) holds its first lock that long and prints `holding <fence>`,
 * so the nemesis can strike while it holds.
 *
 * Run: node -r scripts/ts-register.cjs test/chaos/chaos-worker.ts '<ChaosWorkerArgs JSON>'
 */
import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule } from '../../lib/lock.module';
import { LockService } from '../../lib/lock.service';
import { Locked } from '../../lib/decorators/locked.decorator';
import type { Lock } from '../../lib/lock.interfaces';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { HistoryRecorder } from '../support/history';
import { FencedResourceClient } from './fenced-resource';
import { HoldWatch, watchedSection } from './watched-section';

/** What the runner passes, as one JSON argument. */
export interface ChaosWorkerArgs {
  worker: string;
  options: LockModuleOptions;
  key: string;
  ttl: number;
  /** Longest wait for one acquisition before retrying, ms. */
  waitTimeout: number;
  /** Longest random work inside a normal critical section, ms. */
  holdMs: number;
  /** Victim only: its first critical section lasts this long and is announced. */
  strikeHoldMs?: number;
  maxSections: number;
  historyFile: string;
  witnessFile: string;
  resourceSocket: string;
  /** Start barrier: the worker waits for this file. */
  goFile: string;
  /** The worker finishes its current section and exits once this file exists. */
  stopFile: string;
}

/** Printed as `done <json>` before a clean exit. */
export interface ChaosWorkerStats {
  sections: number;
  witnessWrites: number;
  fencedAccepted: number;
  fencedRejected: number;
  /** Acquisitions that failed (not acquired in time, store down), by error name. */
  errors: Record<string, number>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(args: ChaosWorkerArgs): Promise<void> {
  const recorder = new HistoryRecorder(args.historyFile, args.worker);
  const resource = new FencedResourceClient(args.resourceSocket);
  const stats: ChaosWorkerStats = {
    sections: 0,
    witnessWrites: 0,
    fencedAccepted: 0,
    fencedRejected: 0,
    errors: {},
  };
  let strikePending = args.strikeHoldMs !== undefined;

  const fencedWrite = async (lock: Lock): Promise<void> => {
    const ok = await resource.write(args.worker, args.key, lock.token, lock.fence ?? -1);
    if (ok) stats.fencedAccepted++;
    else stats.fencedRejected++;
  };

  @Injectable()
  class CriticalSection {
    constructor(readonly locks: LockService) {}

    @Locked('{0}', { ttl: args.ttl, waitTimeout: args.waitTimeout })
    async run(key: string): Promise<void> {
      const lock = this.locks.current()!;
      const { token } = lock;
      const held = Object.assign(() => lock.isHeld(), { what: 'isHeld()' });
      const watch = new HoldWatch(recorder, key, token, lock.fence, lock.signal, held);
      const strike = strikePending;
      strikePending = false;
      const work = strike ? args.strikeHoldMs! : Math.random() * args.holdMs;
      const ctx = {
        recorder,
        witnessFile: args.witnessFile,
        stats,
        fencedWrite: () => fencedWrite(lock),
      };
      const announce = strike
        ? () => void process.stdout.write(`holding ${lock.fence}\n`)
        : undefined;
      if (await watchedSection(watch, key, token, work, ctx, announce)) watch.release();
    }
  }

  @Module({ imports: [LockModule.forRoot(args.options)], providers: [CriticalSection] })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error'] });
  const section = app.get(CriticalSection);
  process.stdout.write('ready\n');
  while (!existsSync(args.goFile)) await sleep(5);

  while (!existsSync(args.stopFile) && stats.sections < args.maxSections) {
    try {
      await section.run(args.key);
    } catch (err) {
      const name = (err as Error)?.name ?? 'Error';
      stats.errors[name] = (stats.errors[name] ?? 0) + 1;
      await sleep(20);
    }
  }
  recorder.close();
  resource.close();
  await app.close();
  process.stdout.write(`done ${JSON.stringify(stats)}\n`);
}

main(JSON.parse(process.argv[2]) as ChaosWorkerArgs).catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
