import { Injectable } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { Locked } from 'nestjs-distributed-lock';
import { logLine } from './witness.js';

/** The tick of the `*\/3` schedule a run belongs to (late runs still land in their own tick). */
const tickOf = (): number => Math.floor(Date.now() / 3_000);

/** A job every replica schedules; the lock lets one of them run each tick. */
@Injectable()
export class TickJob {
  /**
   * Runs on one replica per tick; the others find the lock taken and skip. lockAtLeastFor keeps
   * it taken for 2.5 s of the 3 s tick, so a replica whose timer fires up to 2.5 s late (a busy
   * machine) still finds it taken.
   */
  @Cron('*/3 * * * * *')
  @Locked('tick-job', { onBusy: 'skip', lockAtLeastFor: 2_500 })
  async run(): Promise<void> {
    await logLine('ran', `${tickOf()} ${process.pid}`);
  }

  /** The same schedule without a lock: shows that every replica really fires every tick. */
  @Cron('*/3 * * * * *')
  async fired(): Promise<void> {
    await logLine('fired', `${tickOf()} ${process.pid}`);
  }
}
