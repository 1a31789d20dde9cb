/**
 * `@LeaderOnly` and `@Leader` across two instances of an application (two Nest apps in one
 * process on the machine's Redis): the leader-only method runs on one instance only, the same
 * one every call while it leads, and on the other within a second of the leader shutting down;
 * a `@Leader` provider is told when it starts and stops leading. Misuse is refused when the class
 * is defined.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Leader } from '../../lib/leader/leader.decorator';
import { LeaderOnly } from '../../lib/leader/leader-only.decorator';
import { LeaderService } from '../../lib/leader/leader.service';
import type {
  Leadership,
  OnLeadershipGranted,
  OnLeadershipRevoked,
} from '../../lib/leader/leader.interfaces';
import { LockConfigError } from '../../lib/errors/lock.errors';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { sleep } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';

const apps: LockTestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((t) => t.close()));
});

@Injectable()
class Reports {
  runs = 0;

  @LeaderOnly('reports', { ttl: 2_000 })
  async build(): Promise<string> {
    this.runs++;
    return 'built';
  }
}

@Leader('billing', { ttl: 2_000 })
@Injectable()
class BillingWorker implements OnLeadershipGranted, OnLeadershipRevoked {
  readonly events: string[] = [];
  current?: Leadership;

  onLeadershipGranted(leadership: Leadership): void {
    this.current = leadership;
    this.events.push(`granted ${leadership.term}`);
  }

  onLeadershipRevoked(): void {
    this.events.push('revoked');
  }
}

/** An instance of the app, named `id`, on the machine's Redis under `prefix`. */
async function instance(id: string, prefix: string): Promise<LockTestApp> {
  const t = await createLockApp(
    {
      backends: { main: { type: 'redis', url: MACHINE_REDIS_URL, restartGuard: false } },
      keyPrefix: prefix,
      leaderId: id,
    },
    { providers: [Reports, BillingWorker] },
  );
  apps.push(t);
  return t;
}

/** Polls `check` every 20 ms until it is true or `ms` passed; how long it took. */
async function until(check: () => boolean, ms: number): Promise<number> {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > ms) throw new Error(`not true within ${ms} ms`);
    await sleep(20);
  }
  return performance.now() - started;
}

describe('@LeaderOnly and @Leader on two instances', () => {
  it('runs the method on one instance, the same each call, then on the other after it shuts down', async () => {
    const prefix = `leader-only-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const b = await instance('b', prefix);
    const reportsA = a.app.get(Reports);
    const reportsB = b.app.get(Reports);
    // Both campaign from bootstrap; whoever reached the store first leads (either instance).
    const leads = (t: LockTestApp): boolean =>
      t.app.get(LeaderService).status('reports').role === 'leader';
    await until(() => leads(a) || leads(b), 2_000);
    const results: unknown[] = [];
    for (let tick = 0; tick < 10; tick++) {
      results.push(await reportsA.build(), await reportsB.build());
      await sleep(20);
    }
    expect(results.filter((r) => r === 'built')).toHaveLength(10);
    expect(results.filter((r) => r === undefined)).toHaveLength(10);
    const [leader, follower] = reportsA.runs === 10 ? [a, b] : [b, a];
    expect([reportsA.runs, reportsB.runs].sort()).toEqual([0, 10]);

    await leader.close();
    const followerReports = follower.app.get(Reports);
    const took = await until(() => {
      void followerReports.build();
      return followerReports.runs > 0;
    }, 1_500);
    expect(took).toBeLessThan(1_500);
  });

  it('tells a @Leader provider when it starts and stops leading, and campaigns again', async () => {
    const prefix = `leader-hooks-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const workerA = a.app.get(BillingWorker);
    await until(() => workerA.current !== undefined, 2_000);
    const b = await instance('b', prefix);
    const workerB = b.app.get(BillingWorker);
    expect(workerA.events).toEqual([`granted ${workerA.current!.term}`]);

    // A loses its leadership (an operator frees the key): it is told, B leads, A queues again.
    const termA = workerA.current!.term;
    await b.locks.forceRelease('nestjs-distributed-lock:leader:billing');
    await until(() => workerB.current !== undefined, 3_000);
    await until(() => workerA.events.includes('revoked'), 3_000);
    expect(workerB.current!.term).toBeGreaterThan(termA);

    // B shuts down: it is told, and A leads again with a higher term.
    await b.close();
    expect(workerB.events.at(-1)).toBe('revoked');
    await until(() => workerA.events.length === 3, 1_500);
    expect(workerA.events[2]).toMatch(/^granted /);
    expect(workerA.current!.term).toBeGreaterThan(workerB.current!.term);
  });

  it('refuses misuse when the class is defined', () => {
    expect(() => {
      class NotAMethod {
        @(LeaderOnly('x') as PropertyDecorator)
        value = 1;
      }
      return NotAMethod;
    }).toThrow(LockConfigError);
    expect(() => {
      class EmptyName {
        @LeaderOnly('')
        run(): void {}
      }
      return EmptyName;
    }).toThrow(expect.objectContaining({ field: 'name', where: '@LeaderOnly on EmptyName.run' }));
    expect(() => {
      @Leader('n', { ttl: 'soon' as never })
      class BadTtl {}
      return BadTtl;
    }).toThrow(LockConfigError);
  });

  it('refuses, at bootstrap, a leadership ttl the backend cannot give a lease for', async () => {
    @Leader('short-lease', { ttl: 500 })
    @Injectable()
    class ShortLease {}
    const prefix = `ldr-${randomUUID().slice(0, 8)}:`;
    const started = createLockApp(
      {
        backends: { main: { type: 'redis', url: MACHINE_REDIS_URL, restartGuard: false } },
        keyPrefix: prefix,
      },
      { providers: [ShortLease] },
    );
    await expect(started).rejects.toMatchObject({ code: 'LOCK_CONFIG', field: 'ttl' });
    // Nothing was asked of the store: no key under the prefix.
    const t = await instance('probe', prefix);
    expect(await t.locks.isLocked('nestjs-distributed-lock:leader:short-lease')).toBe(false);
  });

  it('refuses to run a @LeaderOnly method before the module is there', async () => {
    await expect(new Reports().build()).rejects.toMatchObject({
      code: 'LOCK_CONFIG',
      field: 'LockModule',
    });
  });
});
