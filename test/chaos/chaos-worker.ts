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
import { readWitness, writeWitness } from '../support/witness-file';

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
const hr = () => process.hrtime.bigint();

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
      recorder.acq(key, token, lock.fence);
      let lastHeld = hr();
      let ended = false;
      const lost = (reason: string): void => {
        if (ended) return;
        ended = true;
        recorder.lost(key, token, reason, lastHeld);
      };
      lock.signal.addEventListener('abort', () => lost(String(lock.signal.reason)));
      /** One look at `isHeld()`: moves the hold's end forward, or ends it. */
      const observe = (): boolean => {
        if (ended) return false;
        if (lock.isHeld()) {
          lastHeld = hr();
          return true;
        }
        lost('isHeld() turned false');
        return false;
      };

      stats.sections++;
      if (!observe()) return;
      await fencedWrite(lock);
      const read = readWitness(args.witnessFile);
      const strike = strikePending;
      strikePending = false;
      const work = strike ? args.strikeHoldMs! : Math.random() * args.holdMs;
      if (strike) process.stdout.write(`holding ${lock.fence}\n`);
      const until = performance.now() + work;
      while (performance.now() < until && observe()) {
        await sleep(Math.min(10, Math.max(0, until - performance.now())));
      }
      // Written without looking: a holder that lost its lock unnoticed writes late.
      await fencedWrite(lock);
      // The witness is not fenced: it is written only after a synchronous look at isHeld().
      if (!observe()) return;
      writeWitness(args.witnessFile, read + 1);
      recorder.witness(key, token, read, read + 1);
      stats.witnessWrites++;
      ended = true;
      recorder.rel(key, token);
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
