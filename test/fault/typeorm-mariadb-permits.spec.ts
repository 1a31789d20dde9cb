/**
 * Counted `for-update` locks on MariaDB (issue 19) where the conformance battery cannot see:
 * takers that disagree about `permits` (or a reader and a counted taker) racing from two apps on
 * an idle key are never admitted together; and a count row left by a killed holder does not
 * refuse the next holder of another count once nobody holds it.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { LockOptions } from '../../lib/lock.interfaces';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { LockConfigError } from '../../lib/errors/lock.errors';
import { scratchTable } from '../../servers/databases';
import { settle, sleep, type Settled } from '../support/async';
import { startHolder } from '../support/holder-process';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions } from '../support/typeorm-backend';

/** Races per pair of requests: enough for the takers' statements to interleave many ways. */
const ROUNDS = 25;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

function setup(): LockModuleOptions {
  const scratch = scratchTable('mariadb', 'mxp');
  cleanups.push(() => scratch.drop());
  return typeormOptions(
    scratch.dataSourceOptions({ poolSize: 12 }),
    'for-update',
    scratch.name,
    `mxp-${randomUUID().slice(0, 8)}:`,
  );
}

async function app(options: LockModuleOptions): Promise<LockTestApp> {
  const t = await createLockApp(options);
  cleanups.push(() => t.close());
  return t;
}

/** What a settled take got, for a failure message. */
function outcome(r: Settled<unknown>): string {
  if (r.ok) return 'granted';
  const error = r.error as Error;
  return `${error?.name}: ${error?.message}`;
}

/**
 * Two apps take one idle key at once with `first` and `second`, ROUNDS times (a new key each):
 * never both granted; a loser is refused (permits) or timed out, and not both time out.
 */
async function race(first: LockOptions, second: LockOptions): Promise<void> {
  const options = setup();
  const a = await app(options);
  const b = await app(options);
  let refused = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const key = `race-${round}`;
    const hold = async (t: LockTestApp, opts: LockOptions) => {
      const lock = await t.locks.acquire(key, { ...opts, waitTimeout: 1_500 });
      await sleep(30); // held long enough for the other to take if it wrongly could
      return lock;
    };
    const [x, y] = await Promise.all([settle(hold(a, first)), settle(hold(b, second))]);
    expect([x.ok, y.ok]).not.toEqual([true, true]);
    // Each registers, then checks for the other: when both register before either checks,
    // both are refused (fail closed, each told why). What must not happen is neither being
    // told anything: both merely timing out would mean the two blocked each other.
    const outcomes = { round, x: outcome(x), y: outcome(y) };
    expect(outcomes).not.toMatchObject({
      x: expect.stringMatching(/^LockNotAcquiredError/),
      y: expect.stringMatching(/^LockNotAcquiredError/),
    });
    for (const r of [x, y]) {
      if (r.ok) await r.value.release();
      else if ((r as { error: unknown }).error instanceof LockConfigError) refused++;
    }
    expect(await a.locks.isLocked(key)).toBe(false);
  }
  // The loser is told why (not merely timed out) in most rounds.
  expect(refused).toBeGreaterThan(ROUNDS / 2);
}

describe('typeorm for-update counted locks on MariaDB', () => {
  it('counted takers of different permits racing from two apps are never admitted together', async () => {
    await race({ permits: 2 }, { permits: 3 });
  }, 120_000);

  it('a reader and a counted taker racing from two apps are never admitted together', async () => {
    await race({ mode: 'shared' }, { permits: 2 });
  }, 120_000);

  it('a killed holder leaves its count behind, but the next holder may bring another', async () => {
    const options = setup();
    const holder = await startHolder({ options, key: 'pool', ttl: 5_000, permits: 2 });
    cleanups.push(async () => {
      holder.child.kill('SIGKILL');
      await holder.exited;
    });
    const t = await app(options);
    // While it holds, its count decides.
    const refused = await settle(t.locks.acquire('pool', { permits: 3, waitTimeout: 1_000 }));
    expect((refused as { error: unknown }).error).toBeInstanceOf(LockConfigError);
    holder.child.kill('SIGKILL');
    await holder.exited;
    const next = await t.locks.acquire('pool', { permits: 3, waitTimeout: 10_000 });
    expect(next.permit).toBe(0);
    expect(await t.locks.inspect('pool')).toMatchObject({ holders: 1, permits: 3, slots: [0] });
    await next.release();
    expect(await t.locks.inspect('pool')).toMatchObject({ held: false, holders: 0 });
  }, 30_000);
});
