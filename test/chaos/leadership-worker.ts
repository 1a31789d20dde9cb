/**
 * A chaos worker that leads instead of locking: a Nest application context whose provider is a
 * `@Leader` candidate for the name `key`. While it leads, it works in ticks, each like the
 * mutex worker's critical section (see chaos-worker.ts): a fenced write under its term, a read
 * of the unfenced witness counter, some work while it keeps checking `isLeader()`, a second
 * fenced write made without looking (a leader that lost its lease unnoticed writes late: the
 * term must stop it), and, only while it still leads, the witness write. A leadership is one
 * hold for `checkHistory`, from the grant to the last observation that `isLeader()` was true
 * (or to the release, when the worker is told to stop); its term is the hold's fence.
 *
 * The module campaigns at bootstrap, so the application is made only once the go file is
 * there: the victim is then first in line. The victim's first tick lasts `strikeHoldMs` and is
 * announced (`holding <term>`), so the nemesis strikes while it leads. After a loss the
 * provider campaigns again (as `@Leader` does) until the stop file appears; the application
 * is then closed, which resigns.
 *
 * Run: node -r scripts/ts-register.cjs test/chaos/leadership-worker.ts '<ChaosWorkerArgs JSON>'
 */
import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Leader } from '../../lib/leader/leader.decorator';
import type { Leadership, OnLeadershipGranted } from '../../lib/leader/leader.interfaces';
import { LockModule } from '../../lib/lock.module';
import { HistoryRecorder } from '../support/history';
import type { ChaosWorkerArgs, ChaosWorkerStats } from './chaos-worker';
import { FencedResourceClient } from './fenced-resource';
import { HoldWatch, watchedSection } from './watched-section';

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
  const stopping = (): boolean => existsSync(args.stopFile);
  /** The current leadership's ticks, while there is one. */
  let leading: Promise<void> = Promise.resolve();

  /** Works in ticks while `leadership` lasts and the worker is not told to stop. */
  const lead = async (leadership: Leadership): Promise<void> => {
    const { key } = args;
    const term = leadership.term;
    const token = `${args.worker}:${term}`;
    const held = Object.assign(() => leadership.isLeader(), { what: 'isLeader()' });
    const watch = new HoldWatch(recorder, key, token, term, leadership.signal, held);
    const ctx = {
      recorder,
      witnessFile: args.witnessFile,
      stats,
      fencedWrite: async (): Promise<void> => {
        if (await resource.write(args.worker, key, token, term)) stats.fencedAccepted++;
        else stats.fencedRejected++;
      },
    };
    while (!stopping()) {
      const strike = strikePending;
      strikePending = false;
      const work = strike ? args.strikeHoldMs! : Math.random() * args.holdMs;
      const announce = strike ? () => void process.stdout.write(`holding ${term}\n`) : undefined;
      if (!(await watchedSection(watch, key, token, work, ctx, announce))) return;
      // A job's interval between ticks.
      await sleep(Math.random() * 10);
    }
    // Told to stop while leading: the hold ends here; the application's close resigns.
    watch.release();
  };

  @Leader(args.key, { ttl: args.ttl })
  @Injectable()
  class Candidate implements OnLeadershipGranted {
    onLeadershipGranted(leadership: Leadership): void {
      leading = lead(leadership);
    }
  }

  @Module({ imports: [LockModule.forRoot(args.options)], providers: [Candidate] })
  class WorkerModule {}

  process.stdout.write('ready\n');
  while (!existsSync(args.goFile)) await sleep(5);
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error'] });
  while (!stopping()) await sleep(20);
  await leading;
  recorder.close();
  resource.close();
  await app.close();
  process.stdout.write(`done ${JSON.stringify(stats)}\n`);
}

main(JSON.parse(process.argv[2]) as ChaosWorkerArgs).catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
