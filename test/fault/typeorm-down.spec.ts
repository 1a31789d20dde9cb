/**
 * A database that is down fails lock calls at once, with the real cause, and never runs a
 * `@Locked` method unlocked: a closed port at bootstrap (`startup: 'fail'` fails the bootstrap,
 * `'degraded'` boots and fails each call), the database going away mid-run (a TCP proxy in front
 * of it closed: the holder's and the waiter's connections cut, new ones refused), a database
 * that comes back, and a connected-but-silent one (a black hole), which `operationTimeout`
 * still bounds. Times to error are printed at the end.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Locked } from '../../lib/decorators/locked.decorator';
import { LockBackendError, LockLostError } from '../../lib/errors/lock.errors';
import type { TypeormBackendConfig } from '../../lib/backends/backend-config';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { findFreePort } from '../../servers/child-processes';
import { createMariadbUser, dataSourceOptions, scratchTable } from '../../servers/databases';
import { startTcpProxy, type TcpProxy } from '../../servers/tcp-proxy';
import { aborted, settle, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions, withMariadbAdmin } from '../support/typeorm-backend';

type Strategy = 'table' | 'for-update' | 'advisory';
type ServerKind = 'postgres' | 'mariadb';

const KINDS: readonly ServerKind[] = ['postgres', 'mariadb'];
const STRATEGIES: readonly Strategy[] = ['table', 'for-update', 'advisory'];
/** "At once": the bound every failure below is held to, ms. */
const AT_ONCE_MS = 1_000;
const SERVER_PORT = { postgres: 5432, mariadb: 3306 } as const;

const timings: string[] = [];
afterAll(() => {
  if (timings.length > 0)
    console.log(`typeorm, database down — time to error:\n${timings.join('\n')}`);
});

/** A service whose method must never run without its lock. */
@Injectable()
class Guarded {
  runs = 0;

  @Locked('guarded', { waitTimeout: 5_000 })
  async run(): Promise<void> {
    this.runs++;
  }
}

/**
 * Lock module options for backend `db` on `dataSource`, with a fresh key prefix (and a table
 * name that is only ever used where the database answers: `extra.tableName`).
 */
function options(
  dataSource: Record<string, unknown>,
  strategy: Strategy,
  extra: Partial<TypeormBackendConfig> = {},
): LockModuleOptions {
  const tableName = extra.tableName ?? 'never_created';
  return {
    ...typeormOptions(dataSource, strategy, tableName, `down-${randomUUID()}:`, extra),
    operationTimeout: 5_000,
  };
}

/** Runs `call`, expecting it to fail; resolves the error and how long it took. */
async function timedFailure(call: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  const outcome = await settle(call());
  const ms = performance.now() - started;
  expect(outcome.ok).toBe(false);
  return { error: (outcome as { error: unknown }).error, ms };
}

/** A `LockBackendError` whose message and cause name `reason` (e.g. ECONNREFUSED 127.0.0.1:5999). */
function expectCause(error: unknown, reason: RegExp, code?: string): void {
  expect(error).toBeInstanceOf(LockBackendError);
  expect((error as Error).message).toMatch(reason);
  if (code !== undefined) expect((error as { cause?: { code?: unknown } }).cause?.code).toBe(code);
}

describe('typeorm, closed port at bootstrap', () => {
  // The file's first app of each kind loads Nest, TypeORM and the driver (about a second on a
  // loaded machine): not what "at once" is about, so that happens before anything is timed.
  beforeAll(async () => {
    for (const kind of KINDS) {
      const port = await findFreePort();
      await settle(createLockApp(options({ ...dataSourceOptions(kind), port }, 'table')));
    }
  }, 60_000);

  for (const kind of KINDS) {
    it(`${kind}, startup 'fail' (default): the bootstrap fails at once naming ECONNREFUSED and the address`, async () => {
      const port = await findFreePort();
      const { error, ms } = await timedFailure(() =>
        createLockApp(options({ ...dataSourceOptions(kind), port }, 'table')),
      );
      timings.push(`  ${kind} bootstrap, closed port: ${ms.toFixed(0)} ms`);
      expect(ms).toBeLessThan(AT_ONCE_MS);
      expectCause(error, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`), 'ECONNREFUSED');
    });

    for (const strategy of STRATEGIES) {
      it(`${kind} ${strategy}, startup 'degraded': boots; every call and health fail at once with the cause; the method never runs`, async () => {
        const port = await findFreePort();
        const refused = new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`);
        const t = await createLockApp(
          options({ ...dataSourceOptions(kind), port }, strategy, { startup: 'degraded' }),
          { providers: [Guarded] },
        );
        try {
          const guarded = t.app.get(Guarded);
          const locked = await timedFailure(() => guarded.run());
          const acquire = await timedFailure(() => t.locks.acquire('k', { waitTimeout: 5_000 }));
          timings.push(
            `  ${kind} ${strategy}, degraded, closed port: @Locked ${locked.ms.toFixed(0)} ms, acquire ${acquire.ms.toFixed(0)} ms`,
          );
          for (const { error, ms } of [locked, acquire]) {
            expect(ms).toBeLessThan(AT_ONCE_MS);
            expectCause(error, refused, 'ECONNREFUSED');
          }
          expect(guarded.runs).toBe(0);
          const started = performance.now();
          const health = await t.locks.health({ timeout: 2_000 });
          expect(performance.now() - started).toBeLessThan(AT_ONCE_MS);
          expect(health.db.status).toBe('down');
          expect(health.db.error).toMatch(refused);
        } finally {
          await t.close();
        }
      });
    }
  }
});

describe('typeorm, startup degraded: the database that answers later is used at once', () => {
  it('mariadb: a login refused at bootstrap, accepted later (the password set meanwhile): the next call works', async () => {
    const user = await createMariadbUser();
    const table = scratchTable('mariadb', 'down_late');
    const password = randomUUID();
    let t: LockTestApp | undefined;
    try {
      t = await createLockApp(
        options({ ...table.dataSourceOptions(), username: user.username, password }, 'advisory', {
          startup: 'degraded',
          tableName: table.name,
        }),
        { providers: [Guarded] },
      );
      const guarded = t.app.get(Guarded);
      const before = await timedFailure(() => guarded.run());
      expect(before.ms).toBeLessThan(AT_ONCE_MS);
      expectCause(before.error, /Access denied/, 'ER_ACCESS_DENIED_ERROR');
      expect(guarded.runs).toBe(0);

      await withMariadbAdmin((admin) =>
        admin.query(`ALTER USER ?@'%' IDENTIFIED BY ?`, [user.username, password]),
      );
      await guarded.run();
      expect(guarded.runs).toBe(1);
      expect((await t.locks.health()).db.status).toBe('up');
    } finally {
      await t?.close();
      await table.drop();
      await user.drop();
    }
  });
});

describe('typeorm, the database goes away mid-run (its TCP proxy closed)', () => {
  for (const kind of KINDS) {
    for (const strategy of STRATEGIES) {
      it(`${kind} ${strategy}: the waiter and new calls fail at once with the cause, a session holder learns at once, the method never runs`, async () => {
        const table = scratchTable(kind, 'down_mid');
        const proxy: TcpProxy = await startTcpProxy(SERVER_PORT[kind]);
        let t: LockTestApp | undefined;
        try {
          t = await createLockApp(
            options({ ...table.dataSourceOptions({ poolSize: 4 }), port: proxy.port }, strategy, {
              tableName: table.name,
            }),
            { providers: [Guarded] },
          );
          const guarded = t.app.get(Guarded);
          const holder = await t.locks.acquire('guarded', { ttl: 3_000 });
          const waiter = settle(t.locks.acquire('guarded', { waitTimeout: 10_000 }));
          const locked = settle(guarded.run()); // waits for the lock too
          await new Promise((resolve) => setTimeout(resolve, 300)); // both are waiting now

          const cutAt = performance.now();
          await proxy.close(); // every connection cut, and the port refuses new ones
          const refused = new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${proxy.port}`);

          const waited = await within(waiter, AT_ONCE_MS * 3, 'the waiter to fail');
          const waiterMs = performance.now() - cutAt;
          const lockedOutcome = await within(locked, AT_ONCE_MS * 3, 'the @Locked call to fail');
          const lockedMs = performance.now() - cutAt;
          const fresh = await timedFailure(() => guarded.run());
          let holderMs: number | undefined;
          if (strategy !== 'table') {
            // A session lock dies with its connection: the holder hears it at once.
            await within(aborted(holder.signal), AT_ONCE_MS, 'the holder to learn');
            holderMs = performance.now() - cutAt;
            expect(holder.signal.reason).toBeInstanceOf(LockLostError);
          }
          timings.push(
            `  ${kind} ${strategy}, cut mid-run: waiter ${waiterMs.toFixed(0)} ms, waiting @Locked ${lockedMs.toFixed(0)} ms, new @Locked ${fresh.ms.toFixed(0)} ms` +
              (holderMs === undefined ? '' : `, holder told ${holderMs.toFixed(0)} ms`),
          );
          for (const outcome of [waited, lockedOutcome]) {
            expect(outcome.ok).toBe(false);
            expect((outcome as { error: unknown }).error).toBeInstanceOf(LockBackendError);
          }
          expect(waiterMs).toBeLessThan(AT_ONCE_MS);
          expect(lockedMs).toBeLessThan(AT_ONCE_MS);
          expect(fresh.ms).toBeLessThan(AT_ONCE_MS);
          expectCause(fresh.error, refused, 'ECONNREFUSED');
          expect(guarded.runs).toBe(0);
          const health = await t.locks.health({ timeout: 2_000 });
          expect(health.db).toMatchObject({
            status: 'down',
            error: expect.stringMatching(refused),
          });
        } finally {
          await proxy.close();
          await t?.close();
          await table.drop();
        }
      });
    }
  }
});

describe('typeorm, a database that is connected but silent (black hole)', () => {
  for (const kind of KINDS) {
    it(`${kind}: a call is bounded by operationTimeout, then fails saying so`, async () => {
      const table = scratchTable(kind, 'down_silent');
      const proxy = await startTcpProxy(SERVER_PORT[kind]);
      let t: LockTestApp | undefined;
      try {
        t = await createLockApp({
          ...options({ ...table.dataSourceOptions(), port: proxy.port }, 'table', {
            tableName: table.name,
          }),
          operationTimeout: 700,
        });
        expect(await t.locks.isLocked('k')).toBe(false); // connected and answering
        proxy.blackhole(true);
        const { error, ms } = await timedFailure(() => t!.locks.acquire('k'));
        timings.push(`  ${kind}, black hole: ${ms.toFixed(0)} ms (operationTimeout 700)`);
        expect(error).toBeInstanceOf(LockBackendError);
        expect((error as Error).message).toMatch(/700 ms/);
        expect(ms).toBeGreaterThanOrEqual(650);
        expect(ms).toBeLessThan(700 + AT_ONCE_MS);
      } finally {
        proxy.blackhole(false);
        await proxy.close();
        await t?.close();
        await table.drop();
      }
    });
  }
});
