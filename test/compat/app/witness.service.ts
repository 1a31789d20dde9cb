import { Inject, Injectable } from '@nestjs/common';
import { Locked, LockService } from 'nestjs-distributed-lock';
import type { Section } from './section.js';
import { bumpCounter, now } from './witness.js';

/** Bumps shared counters with and without `@Locked`, for the mutual-exclusion check. */
@Injectable()
export class WitnessService {
  constructor(@Inject(LockService) private readonly locks: LockService) {}

  /** Serialized across every process of the app by the lock `counter:<name>`. */
  @Locked('counter:{0}', { waitTimeout: 30_000 })
  async bumpLocked(name: string): Promise<Section> {
    const lock = this.locks.current();
    if (!lock) throw new Error('@Locked ran the method without a current lock');
    const start = now();
    const count = await bumpCounter(name, 3);
    return { pid: process.pid, fence: lock.fence, start, end: now(), count };
  }

  /** The control: the same section without a lock, which must lose updates. */
  async bumpUnlocked(name: string): Promise<Section> {
    const start = now();
    const count = await bumpCounter(name, 3);
    return { pid: process.pid, fence: null, start, end: now(), count };
  }
}
