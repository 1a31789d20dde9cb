import { Injectable } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { Locked } from 'nestjs-distributed-lock';
import { logLine } from './witness.js';

/** The tick of a `*\/2` schedule a run belongs to (late runs still land in their own tick). */
const tickOf = (): number => Math.floor(Date.now() / 2_000);

/** A job every replica schedules; the lock lets one of them run each tick. */
@Injectable()
export class TickJob {
  /** Runs on one replica per tick; the others find the lock taken and skip. */
  @Cron('*/2 * * * * *')
  @Locked('tick-job', { onBusy: 'skip', lockAtLeastFor: 1_500 })
  async run(): Promise<void> {
    await logLine('ran', `${tickOf()} ${process.pid}`);
  }

  /** The same schedule without a lock: shows that every replica really fires every tick. */
  @Cron('*/2 * * * * *')
  async fired(): Promise<void> {
    await logLine('fired', `${tickOf()} ${process.pid}`);
  }
}
