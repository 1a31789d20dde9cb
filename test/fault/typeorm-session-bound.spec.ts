/**
 * Connection-bound SQL locks (`for-update`, `advisory`) are bounded on the server side by
 * `sessionTimeout`: a holder whose connection goes silent (black-holed by a TCP proxy) loses the
 * lock on the server within that bound, and its own lease ran out before (never two holders);
 * a waiter granted while black-holed is bounded the same way; a live holder keeps its lock past
 * the bound, also while `lockAtLeastFor` keeps a released lock; and a connection goes back to
 * the pool with its usual timeouts, so idle pooled connections are not ended by the server.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import type { RowDataPacket } from 'mysql2/promise';
import type { Lock } from '../../lib/lock.interfaces';
import {
  createMariadbUser,
  dataSourceOptions,
  scratchTable,
  type MariadbUser,
  type ScratchTable,
} from '../../servers/databases';
import { startTcpProxy, type TcpProxy } from '../../servers/tcp-proxy';
import { aborted, sleep, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions, withMariadbAdmin } from '../support/typeorm-backend';

type Strategy = 'for-update' | 'advisory';
type ServerKind = 'postgres' | 'mariadb';

const SESSION_TIMEOUT_MS = 1_000;
/** MariaDB counts `wait_timeout` in whole seconds and checks it on its own clock: some slack. */
const SERVER_SLACK_MS = 1_000;
const SERVER_PORT = { postgres: 5432, mariadb: 3306 } as const;

const timings: string[] = [];
afterAll(() => {
  if (timings.length > 0) console.log(`typeorm session bound:\n${timings.join('\n')}`);
});

/** One database login per test, so its connections can be counted on the server. */
interface Login {
  options(table: ScratchTable, port?: number): Record<string, unknown>;
  /** Connections of this login open on the server now. */
  connections(): Promise<number>;
  drop(): Promise<void>;
}

async function newLogin(kind: ServerKind): Promise<Login> {
  if (kind === 'postgres') {
    const applicationName = `ndl-bound-${randomBytes(4).toString('hex')}`;
    return {
      options: (table, port) => ({
        ...table.dataSourceOptions({ poolSize: 4, applicationName }),
        ...(port === undefined ? {} : { port }),
      }),
      connections: async () => {
        const rows = await withAdminPostgres((query) =>
          query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [
            applicationName,
          ]),
        );
        return Number(rows[0].n);
      },
      drop: async () => undefined,
    };
  }
  const user: MariadbUser = await createMariadbUser();
  return {
    options: (table, port) => ({
      ...table.dataSourceOptions({ poolSize: 4 }),
      username: user.username,
      password: user.password,
      ...(port === undefined ? {} : { port }),
    }),
    connections: async () => {
      const [rows] = await withMariadbAdmin((admin) =>
        admin.query<RowDataPacket[]>(
          'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE USER = ?',
          [user.username],
        ),
      );
      return Number(rows[0].n);
    },
    drop: () => user.drop(),
  };
}

/** Runs `query` on a short-lived admin connection to the test Postgres. */
async function withAdminPostgres(
  work: (
    query: (sql: string, params: unknown[]) => Promise<Array<Record<string, unknown>>>,
  ) => Promise<Array<Record<string, unknown>>>,
): Promise<Array<Record<string, unknown>>> {
  const { DataSource } = await import('typeorm');
  const ds = new DataSource({ ...dataSourceOptions('postgres', { poolSize: 1 }) } as never);
  await ds.initialize();
  try {
    return await work((sql, params) => ds.query(sql, params));
  } finally {
    await ds.destroy();
  }
}

/** A test's parts: its table, login, proxy, apps; all closed afterwards. */
async function withSetup(
  kind: ServerKind,
  work: (s: {
    table: ScratchTable;
    login: Login;
    proxy: TcpProxy;
    app(viaProxy: boolean, strategy: Strategy): Promise<LockTestApp>;
  }) => Promise<void>,
): Promise<void> {
  const table = scratchTable(kind, 'bound');
  const login = await newLogin(kind);
  const proxy = await startTcpProxy(SERVER_PORT[kind]);
  const apps: LockTestApp[] = [];
  const keyPrefix = `bound-${randomUUID()}:`;
  try {
    await work({
      table,
      login,
      proxy,
      app: async (viaProxy, strategy) => {
        const port = viaProxy ? proxy.port : undefined;
        const app = await createLockApp(
          typeormOptions(login.options(table, port), strategy, table.name, keyPrefix, {
            sessionTimeout: SESSION_TIMEOUT_MS,
          }),
        );
        apps.push(app);
        return app;
      },
    });
  } finally {
    proxy.blackhole(false);
    await proxy.close();
    for (const app of apps) await app.close().catch(() => undefined);
    await table.drop();
    await login.drop();
  }
}

describe('typeorm session locks: the server bounds a holder it no longer hears from (sessionTimeout)', () => {
  for (const kind of ['postgres', 'mariadb'] as const) {
    for (const strategy of ['for-update', 'advisory'] as const) {
      it(`${strategy} on ${kind}: holder black-holed; another app gets the key within the bound, after the holder stopped believing`, async () => {
        await withSetup(kind, async ({ proxy, app }) => {
          const a = await app(true, strategy);
          const b = await app(false, strategy);
          const held = await a.locks.acquire('victim', { ttl: 30_000 });
          // Renewal (every third of 90 % of the bound) has reached the server just now.
          await sleep(350);
          proxy.blackhole(true);
          const cutAt = performance.now();
          let lostAt: number | undefined;
          void aborted(held.signal).then(() => (lostAt = performance.now()));
          const next: Lock = await b.locks.acquire('victim', {
            waitTimeout: SESSION_TIMEOUT_MS * 10,
          });
          const grantedAt = performance.now();
          timings.push(
            `  ${strategy} on ${kind}: holder black-holed, its lease ran out after ${((lostAt ?? NaN) - cutAt).toFixed(0)} ms, another app granted after ${(grantedAt - cutAt).toFixed(0)} ms (sessionTimeout ${SESSION_TIMEOUT_MS})`,
          );
          expect(lostAt).toBeDefined(); // never two holders that both believe
          expect(lostAt!).toBeLessThanOrEqual(grantedAt);
          expect(held.isHeld()).toBe(false);
          expect(grantedAt - cutAt).toBeLessThanOrEqual(SESSION_TIMEOUT_MS + SERVER_SLACK_MS);
          expect(next.fence).toBeGreaterThan(held.fence!);
          await next.release();
        });
      }, 30_000);
    }

    it(`for-update on ${kind}: a waiter granted while black-holed is ended by the server within the bound too`, async () => {
      await withSetup(kind, async ({ proxy, app }) => {
        const waiterApp = await app(true, 'for-update');
        const other = await app(false, 'for-update');
        const holder = await other.locks.acquire('queued');
        const waiter = waiterApp.locks.acquire('queued', { waitTimeout: 20_000 });
        waiter.catch(() => undefined);
        await sleep(300); // the waiter waits in the database now
        proxy.blackhole(true);
        await holder.release(); // the server grants the row to the black-holed waiter
        const releasedAt = performance.now();
        const third = await other.locks.acquire('queued', { waitTimeout: SESSION_TIMEOUT_MS * 10 });
        const grantedAt = performance.now();
        timings.push(
          `  for-update on ${kind}: waiter granted while black-holed, freed by the server after ${(grantedAt - releasedAt).toFixed(0)} ms`,
        );
        expect(grantedAt - releasedAt).toBeLessThanOrEqual(SESSION_TIMEOUT_MS + SERVER_SLACK_MS);
        await third.release();
      });
    }, 30_000);

    for (const strategy of ['for-update', 'advisory'] as const) {
      it(`${strategy} on ${kind}: a live holder keeps its lock past the bound, also through lockAtLeastFor; its connections go back with their usual timeouts`, async () => {
        await withSetup(kind, async ({ login, app }) => {
          const a = await app(false, strategy);
          const lock = await a.locks.acquire('kept', {
            ttl: 30_000,
            lockAtLeastFor: SESSION_TIMEOUT_MS * 5,
          });
          await sleep(SESSION_TIMEOUT_MS * 2); // renewed, so never idle that long
          expect(lock.isHeld()).toBe(true);
          await lock.release(); // kept until lockAtLeastFor: no renewal, the keep-alive holds it
          await sleep(SESSION_TIMEOUT_MS * 1.5);
          expect(await a.locks.isLocked('kept')).toBe(true);
          await within(
            (async () => {
              while (await a.locks.isLocked('kept')) await sleep(50);
            })(),
            SESSION_TIMEOUT_MS * 3,
            'the key to be freed after lockAtLeastFor',
          );
          // Every connection that held a lock is back in the pool with the server's defaults:
          // idle for longer than the bound, none is ended.
          const before = await login.connections();
          await sleep(SESSION_TIMEOUT_MS + SERVER_SLACK_MS + 500);
          expect(await login.connections()).toBe(before);
          expect(await a.locks.isLocked('kept')).toBe(false);
        });
      }, 30_000);
    }
  }
});
