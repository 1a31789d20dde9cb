/**
 * A candidate for one leadership name, in a process of its own: a provider whose
 * `@LeaderOnly` method runs every `tickMs` and, when it runs, reports a write under its term.
 * Prints JSON lines: `{"ev":"write","id","term","t"}` for each such write (`t`: wall-clock ms,
 * comparable across processes of one machine). SIGTERM closes the app (which resigns) and exits.
 *
 * Run: node -r scripts/ts-register.cjs test/support/leader-worker.ts '<LeaderWorkerArgs JSON>'
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LeaderOnly } from '../../lib/leader/leader-only.decorator';
import { LeaderService } from '../../lib/leader/leader.service';
import { LockModule } from '../../lib/lock.module';
import type { LockModuleOptions } from '../../lib/lock.module-options';

/** What the parent passes. */
export interface LeaderWorkerArgs {
  options: LockModuleOptions;
  name: string;
  ttl: number;
  tickMs: number;
}

/** One line of the worker's output. */
export interface LeaderWorkerLine {
  ev: 'ready' | 'write';
  id: string;
  term?: number;
  t: number;
}

const now = (): number => performance.timeOrigin + performance.now();
const print = (line: LeaderWorkerLine): boolean =>
  process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(args: LeaderWorkerArgs): Promise<void> {
  @Injectable()
  class Job {
    constructor(private readonly leaders: LeaderService) {}

    @LeaderOnly(args.name, { ttl: args.ttl })
    async tick(): Promise<void> {
      // Runs only while this instance leads: the write carries the term it leads under.
      const { term } = this.leaders.status(args.name);
      print({ ev: 'write', id: this.leaders.id, term, t: now() });
    }
  }

  @Module({ imports: [LockModule.forRoot(args.options)], providers: [Job] })
  class LeaderModule {}
  const app = await NestFactory.createApplicationContext(LeaderModule, { logger: ['error'] });
  const job = app.get(Job);
  const timer = setInterval(() => void job.tick(), args.tickMs);
  print({ ev: 'ready', id: app.get(LeaderService).id, t: now() });
  process.once('SIGTERM', () => {
    clearInterval(timer);
    void app.close().then(() => process.exit(0));
  });
}

main(JSON.parse(process.argv[2]) as LeaderWorkerArgs).catch((err: unknown) => {
  process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
