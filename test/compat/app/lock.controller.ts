import { Controller, Get, Inject, Param, Post, Query } from '@nestjs/common';
import { type Lock, Locked, LockService } from 'nestjs-distributed-lock';
import type { Section } from './section.js';
import { WitnessService } from './witness.service.js';

/** The routes the compatibility battery drives over HTTP. */
@Controller()
export class LockController {
  /** Bare locks taken by `POST /bare/:key`, held until shutdown releases them. */
  private readonly bare: Lock[] = [];

  constructor(
    @Inject(LockService) private readonly locks: LockService,
    @Inject(WitnessService) private readonly witness: WitnessService,
  ) {}

  @Post('counter/:name/locked')
  bumpLocked(@Param('name') name: string): Promise<Section> {
    return this.witness.bumpLocked(name);
  }

  @Post('counter/:name/unlocked')
  bumpUnlocked(@Param('name') name: string): Promise<Section> {
    return this.witness.bumpUnlocked(name);
  }

  /** Holds `hold:<key>` for `ms`, or until the lock's signal aborts; busy answers 409. */
  @Post('hold/:key')
  @Locked('hold:{0}', { waitTimeout: 0 })
  async hold(@Param('key') key: string, @Query('ms') ms: string) {
    const lock = this.locks.current();
    if (!lock) throw new Error('@Locked ran the route without a current lock');
    const aborted = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), Number(ms));
      lock.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        { once: true },
      );
    });
    return { key, fence: lock.fence, aborted };
  }

  /** Takes `bare:<key>` with a bare acquire (no scope) and keeps it. */
  @Post('bare/:key')
  async takeBare(@Param('key') key: string) {
    const lock = await this.locks.acquire(`bare:${key}`, { waitTimeout: 0 });
    this.bare.push(lock);
    return { key: lock.key, fence: lock.fence };
  }

  @Get('locked/:key')
  async isLocked(@Param('key') key: string) {
    return { locked: await this.locks.isLocked(key) };
  }
}
