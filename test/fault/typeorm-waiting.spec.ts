/**
 * How SQL waiters wait (issue 18). `for-update`: the waiters of a process share a bounded number
 * of connections: a key's callers queue in a local line whose head alone waits in the database,
 * and at most `maxWaitingConnections` connections wait at once, so a pool of 4 serves 12 waiters
 * of one key, in turn, while ordinary queries still get a connection; waiters past the cap still
 * get their locks, time out and abort on time, and leave nothing pinned. PostgreSQL `table`:
 * waiters are woken by the release's NOTIFY, counted in take attempts (a polling waiter makes
 * many, a notified one about two), and the listening connection comes back when it is killed;
 * with `releaseNotifications: false` no listening connection is opened, its waiters poll, and
 * its releases still wake the waiters of instances that listen.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import type { RowDataPacket } from 'mysql2/promise';
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { TypeormBackendConfig } from '../../lib/backends/backend-config';
import { SqlDialect, storedKey } from '../../lib/backends/sql/sql-dialect';
import { sqlBackendFactory } from '../../lib/backends/sql/sql.factory';
import { TableStrategy } from '../../lib/backends/sql/table.strategy';
import { LockConfigError, LockNotAcquiredError } from '../../lib/errors/lock.errors';
import type { Lock } from '../../lib/lock.interfaces';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import {
  dataSourceOptions,
  killConnections,
  scratchTable,
  type ScratchTable,
} from '../../servers/databases';
import { settle, sleep, stillPendingAfter, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions, withMariadbAdmin } from '../support/typeorm-backend';

type ServerKind = 'postgres' | 'mariadb';
const SERVERS: readonly ServerKind[] = ['postgres', 'mariadb'];

const timings: string[] = [];
afterAll(() => {
  if (timings.length > 0) console.log(`typeorm waiting:\n${timings.join('\n')}`);
});

/** Runs one statement on a short-lived admin connection of the test database. */
async function adminQuery(
  kind: ServerKind,
  sql: string,
  params: unknown[] = [],
): Promise<Array<Record<string, unknown>>> {
  if (kind === 'mariadb') {
    const [rows] = await withMariadbAdmin((admin) => admin.query<RowDataPacket[]>(sql, params));
    return rows;
  }
  const ds = new DataSource({
    ...dataSourceOptions('postgres', { poolSize: 1 }),
  } as unknown as DataSourceOptions);
  await ds.initialize();
  try {
    return (await ds.query(sql, params)) as Array<Record<string, unknown>>;
  } finally {
    await ds.destroy();
  }
}

/** Sessions waiting in the database right now for a row of `table` (`SELECT ... FOR UPDATE`). */
async function databaseWaiters(kind: ServerKind, table: string): Promise<number> {
  const rows =
    kind === 'postgres'
      ? await adminQuery(
          kind,
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE $1`,
          [`%"${table}"%FOR UPDATE%`],
        )
      : await adminQuery(
          kind,
          `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
            WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE ?`,
          [`%\`${table}\`%FOR UPDATE WAIT%`],
        );
  return Number(rows[0].n);
}

/** A DataSource of the test, passed to the module (so the test can run its own queries on it). */
async function openDataSource(table: ScratchTable, poolSize: number): Promise<DataSource> {
  const ds = new DataSource(table.dataSourceOptions({ poolSize }) as unknown as DataSourceOptions);
  await ds.initialize();
  return ds;
}

/** Module options: one for-update backend `db` on `dataSource`. */
function forUpdateOn(
  dataSource: DataSource,
  table: ScratchTable,
  keyPrefix: string,
  extra: { maxWaitingConnections?: number } = {},
): LockModuleOptions {
  return {
    backends: {
      db: {
        type: 'typeorm',
        dataSource,
        strategy: 'for-update',
        tableName: table.name,
        createTable: true,
        ...extra,
      },
    },
    keyPrefix,
  };
}

/** Resolves how long an ordinary query on `ds` took, ms. */
async function ordinaryQuery(ds: DataSource): Promise<number> {
  const t0 = performance.now();
  await ds.query('SELECT 1 AS one');
  return performance.now() - t0;
}

/** The error a typeorm backend's options are refused with (fails the test if accepted). */
function refusal(config: Record<string, unknown>): Error {
  try {
    sqlBackendFactory.validate(config as never, 'backends.db');
  } catch (err) {
    return err as Error;
  }
  throw new Error(`accepted ${JSON.stringify(config)}`);
}

describe('for-update waiters share a bounded number of connections', () => {
  for (const kind of SERVERS) {
    it(`${kind}, pool 4: 12 concurrent waiters of one key all get it in turn; one waits in the database; ordinary queries still run`, async () => {
      const table = scratchTable(kind, 'wait_share');
      const ds = await openDataSource(table, 4);
      let t: LockTestApp | undefined;
      try {
        t = await createLockApp(forUpdateOn(ds, table, `share-${randomUUID()}:`));
        const locks = t.locks;
        const holder = await locks.acquire('k');
        let inside = 0;
        let most = 0;
        const fences: number[] = [];
        const t0 = performance.now();
        const waiters = Array.from({ length: 12 }, () =>
          locks.withLock(
            'k',
            async (lock: Lock) => {
              inside++;
              most = Math.max(most, inside);
              fences.push(lock.fence as number);
              await sleep(20);
              inside--;
            },
            { waitTimeout: 60_000 },
          ),
        );
        // Every waiter queued: one in the database's lock queue, eleven in line in process.
        await within(
          (async () => {
            while ((await locks.inspect('k')).waiting !== 12) await sleep(20);
          })(),
          10_000,
          'inspect to count the 12 waiters',
        );
        expect(await databaseWaiters(kind, table.name)).toBe(1);
        // The pool (4) is not eaten by the waiters: an ordinary query gets a connection at once.
        expect(await within(ordinaryQuery(ds), 2_000, 'an ordinary query')).toBeLessThan(2_000);

        await holder.release();
        await within(Promise.all(waiters), 30_000, 'the 12 waiters');
        const took = performance.now() - t0;
        timings.push(
          `${kind}: 12 waiters of one key on a pool of 4 served in ${Math.round(took)} ms`,
        );
        expect(most).toBe(1);
        expect(fences).toHaveLength(12);
        for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
        expect(fences[0]).toBeGreaterThan(holder.fence as number);
        // Nothing left waiting or pinned: the key is free, and the whole pool answers.
        expect(await databaseWaiters(kind, table.name)).toBe(0);
        expect((await locks.inspect('k')).waiting).toBe(0);
        await Promise.all([1, 2, 3, 4].map(() => ordinaryQuery(ds)));
        expect(await locks.isLocked('k')).toBe(false);
      } finally {
        await t?.close();
        await ds.destroy();
        await table.drop();
      }
    }, 60_000);

    it(`${kind}, maxWaitingConnections 1: waiters of three keys use one waiting connection and all get their keys; past the cap and in line they time out and abort on time, leaving nothing behind`, async () => {
      const table = scratchTable(kind, 'wait_cap');
      const prefix = `cap-${randomUUID()}:`;
      const holdersDs = await openDataSource(table, 6);
      const ds = await openDataSource(table, 6);
      let holders: LockTestApp | undefined;
      let t: LockTestApp | undefined;
      try {
        holders = await createLockApp(forUpdateOn(holdersDs, table, prefix));
        t = await createLockApp(forUpdateOn(ds, table, prefix, { maxWaitingConnections: 1 }));
        const held = await Promise.all(
          ['a', 'b', 'c', 'd', 'e'].map((key) => holders!.locks.acquire(key)),
        );
        const locks = t.locks;
        const waiters = ['a', 'b', 'c'].map((key) => locks.acquire(key, { waitTimeout: 60_000 }));
        // Each key's waiter is the head of its line: one in the database, two past the cap.
        await within(
          (async () => {
            for (const key of ['a', 'b', 'c']) {
              while ((await locks.inspect(key)).waiting !== 1) await sleep(20);
            }
          })(),
          10_000,
          'the three waiters to queue',
        );

        // A head past the cap (d) and a caller in line behind another (b): a short waitTimeout
        // fails on time; an abort (e, c) at once.
        const timeouts: number[] = [];
        for (const key of ['d', 'b']) {
          const t0 = performance.now();
          const short = await settle(locks.acquire(key, { waitTimeout: 300 }));
          timeouts.push(performance.now() - t0);
          expect(short.ok).toBe(false);
          if (!short.ok) expect(short.error).toBeInstanceOf(LockNotAcquiredError);
        }
        const aborts: number[] = [];
        for (const key of ['e', 'c']) {
          const controller = new AbortController();
          const abandoned = settle(
            locks.acquire(key, { waitTimeout: 60_000, signal: controller.signal }),
          );
          expect(await stillPendingAfter(abandoned, 100)).toBe(true);
          const t0 = performance.now();
          controller.abort();
          expect((await within(abandoned, 2_000, 'the aborted waiter')).ok).toBe(false);
          aborts.push(performance.now() - t0);
        }
        timings.push(
          `${kind}: waitTimeout 300 failed after ${timeouts.map(Math.round).join(' / ')} ms (head past the cap / in line), an abort after ${aborts.map(Math.round).join(' / ')} ms`,
        );
        for (const took of timeouts) {
          expect(took).toBeGreaterThanOrEqual(280);
          expect(took).toBeLessThan(300 + 1_000);
        }
        for (const took of aborts) expect(took).toBeLessThan(500);

        // One waiting connection for three keys, sampled while they wait.
        for (let i = 0; i < 5; i++) {
          expect(await databaseWaiters(kind, table.name)).toBeLessThanOrEqual(1);
          await sleep(50);
        }
        for (const waiter of waiters) expect(await stillPendingAfter(waiter, 0)).toBe(true);
        expect(await within(ordinaryQuery(ds), 2_000, 'an ordinary query')).toBeLessThan(2_000);

        // Released: every waiter gets its key, the ones past the cap by their tries.
        const t0 = performance.now();
        for (const lock of held) await lock.release();
        const granted = await within(Promise.all(waiters), 10_000, 'the three waiters');
        for (const key of ['d', 'e']) expect(await locks.isLocked(key)).toBe(false);
        timings.push(
          `${kind}: three keys released, their waiters (cap 1) granted within ${Math.round(performance.now() - t0)} ms`,
        );
        for (const lock of granted) expect(lock.isHeld()).toBe(true);
        for (const lock of granted) await lock.release();
        expect(await databaseWaiters(kind, table.name)).toBe(0);
        for (const key of ['a', 'b', 'c', 'd', 'e']) {
          expect((await locks.inspect(key)).waiting).toBe(0);
        }
        // Nothing pinned: locks on four keys at once still fit the pool of 6 (5 pins).
        const four = await Promise.all(['w', 'x', 'y', 'z'].map((key) => locks.acquire(key)));
        for (const lock of four) await lock.release();
      } finally {
        await t?.close();
        await holders?.close();
        await ds.destroy();
        await holdersDs.destroy();
        await table.drop();
      }
    }, 60_000);

    // inspect() runs its probes side by side on pooled connections: the count of the row's
    // waiters must not take the probe that reads whether the row is held (SKIP LOCKED) for one.
    // A CI run on a loaded host once saw `waiting: 1` on a free key that way. Here such probes,
    // and a NOWAIT try, are kept in flight on purpose: each statement also takes a lock the test
    // holds (a gate), on a row nobody holds (a skipped row would end the statement at once).
    it(`${kind}: inspect counts as waiters only sessions that wait: not a SKIP LOCKED probe or a NOWAIT try in flight beside it`, async () => {
      const table = scratchTable(kind, 'wait_probe');
      const prefix = `probe-${randomUUID()}:`;
      const ds = await openDataSource(table, 6);
      const gateDs = await openDataSource(table, 1); // one session: the gate's holder
      let t: LockTestApp | undefined;
      try {
        t = await createLockApp(forUpdateOn(ds, table, prefix));
        const locks = t.locks;
        const held = await locks.acquire('held'); // makes the table; its row is locked
        const pg = kind === 'postgres';
        // Quoted and stored as the backend does, so the probes read as its own statements.
        const name = new SqlDialect(pg ? 'postgres' : 'mysql').quote(table.name);
        const stored = storedKey(`${prefix}free`);
        await ds.query(
          `INSERT INTO ${name} (lock_key, key_text, fence) VALUES (${pg ? '$1, $2' : '?, ?'}, 0)`,
          [stored, `${prefix}free`],
        );
        const gate = randomBytes(4).readUInt32BE() >>> 1;
        /** One probe of the free row per clause, in flight until the gate opens. */
        const inFlight = async (clauses: string[]): Promise<{ probes: Promise<unknown> }> => {
          await gateDs.query(pg ? 'SELECT pg_advisory_lock($1)' : 'SELECT GET_LOCK(?, 0)', [
            `${gate}`,
          ]);
          const probes = Promise.all(
            clauses.map((clause, i) =>
              ds.query(
                pg
                  ? `SELECT pg_advisory_xact_lock_shared($1), lock_key FROM ${name} WHERE lock_key = $2 ${clause}`
                  : // Through the gate and out again (MariaDB's user locks are exclusive).
                    `SELECT GET_LOCK(?, 30) + RELEASE_LOCK(?) AS gate${i}, lock_key FROM ${name} WHERE lock_key = ? ${clause}`,
                pg ? [`${gate}`, stored] : [`${gate}`, `${gate}`, stored],
              ),
            ),
          );
          await within(
            (async () => {
              while ((await gateWaiters()) < clauses.length) await sleep(20);
            })(),
            5_000,
            'the probes to reach the gate',
          );
          return { probes }; // wrapped: an async function returning it would wait for it
        };
        const gateWaiters = async (): Promise<number> => {
          const rows = pg
            ? await adminQuery(
                kind,
                `SELECT count(*)::int AS n FROM pg_stat_activity
                  WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE $1`,
                [`%${name}%`],
              )
            : await adminQuery(
                kind,
                `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE ?`,
                [`%${name}%`],
              );
          return Number(rows[0].n);
        };
        const openGate = (): Promise<unknown> =>
          gateDs.query(pg ? 'SELECT pg_advisory_unlock($1)' : 'SELECT RELEASE_LOCK(?)', [
            `${gate}`,
          ]);
        const countedWhileInFlight = async (clauses: string[]): Promise<number[]> => {
          const { probes } = await inFlight(clauses);
          const seen: number[] = [];
          for (let i = 0; i < 3; i++) seen.push((await locks.inspect('free')).waiting ?? -1);
          // Counted while they ran: they are still waiting at the gate.
          expect(await stillPendingAfter(probes, 0)).toBe(true);
          expect(await gateWaiters()).toBe(clauses.length);
          await openGate();
          await within(probes, 5_000, 'the probes after the gate opened');
          return seen;
        };
        const share = pg ? 'FOR KEY SHARE SKIP LOCKED' : 'LOCK IN SHARE MODE SKIP LOCKED';
        expect(await countedWhileInFlight([share, share])).toEqual([0, 0, 0]);
        expect(await countedWhileInFlight(['FOR UPDATE NOWAIT'])).toEqual([0, 0, 0]);

        // And it counts a real waiter (so the zeros above are no blind count).
        const waiter = locks.acquire('held', { waitTimeout: 10_000 });
        await within(
          (async () => {
            while ((await locks.inspect('held')).waiting !== 1) await sleep(20);
          })(),
          5_000,
          'the waiter to be counted',
        );
        await held.release();
        await (await waiter).release();
        expect((await locks.inspect('held')).waiting).toBe(0);
      } finally {
        await t?.close();
        await gateDs.destroy();
        await ds.destroy();
        await table.drop();
      }
    }, 60_000);
  }

  it('maxWaitingConnections is checked at bootstrap, naming the field', async () => {
    const base = {
      type: 'typeorm' as const,
      dataSourceOptions: dataSourceOptions('postgres', { poolSize: 4 }),
      strategy: 'for-update' as const,
    };
    const refused = (config: Record<string, unknown>): Error => refusal({ ...base, ...config });
    for (const bad of [-1, 1.5, '2', Number.NaN, Infinity]) {
      const err = refused({ maxWaitingConnections: bad });
      expect(err).toBeInstanceOf(LockConfigError);
      expect(err.message).toMatch(/backends\.db\.maxWaitingConnections/);
    }
    expect(refused({ maxWaitingConnections: 3 }).message).toMatch(
      /maxWaitingConnections.*at most 2 with a pool of 4/,
    );
    expect(refused({ maxWaitingConnections: 1, strategy: 'table' }).message).toMatch(
      /maxWaitingConnections.*for-update/,
    );
    expect(() =>
      sqlBackendFactory.validate({ ...base, maxWaitingConnections: 2 }, 'backends.db'),
    ).not.toThrow();
    expect(() =>
      sqlBackendFactory.validate({ ...base, maxWaitingConnections: 0 }, 'backends.db'),
    ).not.toThrow();
    // Through the module: the bootstrap fails with the same error.
    const table = scratchTable('postgres', 'wait_conf');
    const boot = await settle(
      createLockApp(
        typeormOptions(table.dataSourceOptions({ poolSize: 3 }), 'for-update', table.name, 'x:', {
          maxWaitingConnections: 2,
        }),
      ),
    );
    expect(boot.ok).toBe(false);
    if (!boot.ok) {
      expect(boot.error).toBeInstanceOf(LockConfigError);
      expect((boot.error as Error).message).toMatch(/backends\.db\.maxWaitingConnections/);
    }
  });
});

/**
 * Counts `table` take attempts on `fullKey` (the strategy's own method, so every attempt is
 * seen, whoever makes it); `restore()` puts the method back.
 */
function countTakes(fullKey: string): { readonly count: () => number; restore(): void } {
  const proto = TableStrategy.prototype;
  const original = proto.take;
  let n = 0;
  proto.take = function counted(this: TableStrategy, ...args: Parameters<TableStrategy['take']>) {
    if (args[1].key === fullKey) n++;
    return original.apply(this, args);
  };
  return {
    count: () => n,
    restore: () => {
      proto.take = original;
    },
  };
}

/**
 * `holderApp` holds a key `holdMs` while a waiter of `waiterApp` (another backend, as another
 * process would be: only the database can tell it of the release) waits; how many take attempts
 * the waiter needed, and how long after the release it got the key.
 */
async function handOff(
  holderApp: LockTestApp,
  waiterApp: LockTestApp,
  fullKey: string,
  key: string,
  holdMs: number,
  waitTimeout: number,
): Promise<{ attempts: number; afterReleaseMs: number }> {
  const holder = await holderApp.locks.acquire(key);
  const takes = countTakes(fullKey);
  try {
    const waiter = waiterApp.locks.acquire(key, { waitTimeout });
    await sleep(holdMs);
    const t0 = performance.now();
    await holder.release();
    const lock = await within(waiter, 10_000, 'the waiter');
    const afterReleaseMs = performance.now() - t0;
    expect(lock.fence as number).toBeGreaterThan(holder.fence as number);
    await lock.release();
    return { attempts: takes.count(), afterReleaseMs };
  } finally {
    takes.restore();
  }
}

describe('PostgreSQL table: waiters are woken by the release (LISTEN/NOTIFY)', () => {
  it('a waiter of another backend is woken by the release: 3 take attempts over a 1.5 s hold, granted before its fallback timer (a polling waiter needs many: shown on MariaDB); the listener comes back when killed', async () => {
    const applicationName = `ndl-notify-${randomBytes(4).toString('hex')}`;
    const pgTable = scratchTable('postgres', 'wait_notify');
    const mariaTable = scratchTable('mariadb', 'wait_poll');
    const prefix = `notify-${randomUUID()}:`;
    const apps: LockTestApp[] = [];
    const app = async (table: ScratchTable, options: Record<string, unknown>) => {
      const made = await createLockApp(
        typeormOptions(table.dataSourceOptions(options), 'table', table.name, prefix),
      );
      apps.push(made);
      return made;
    };
    try {
      const pg = await app(pgTable, { poolSize: 4, applicationName });
      const pgHolder = await app(pgTable, { poolSize: 4 });
      const maria = await app(mariaTable, { poolSize: 4 });
      const mariaHolder = await app(mariaTable, { poolSize: 4 });

      // Polling (no notifications on MariaDB): attempts every 5-250 ms of back-off.
      const polled = await handOff(mariaHolder, maria, `${prefix}k`, 'k', 1_500, 20_000);
      // Notified: the try before the wait, the head's try, the one the release wakes. Without
      // the notification its next try would be at the end of its waitTimeout (2.5 s, before its
      // 3 s fallback timer; the lease has 28 s left), about 1 s after the release.
      const notified = await handOff(pgHolder, pg, `${prefix}k`, 'k', 1_500, 2_500);
      timings.push(
        `table, 1.5 s hold: polled waiter ${polled.attempts} take attempts (granted ${Math.round(polled.afterReleaseMs)} ms after the release), notified waiter ${notified.attempts} (${Math.round(notified.afterReleaseMs)} ms)`,
      );
      expect(polled.attempts).toBeGreaterThanOrEqual(8);
      expect(notified.attempts).toBeLessThanOrEqual(4);
      expect(notified.afterReleaseMs).toBeLessThan(500);

      // The listening connection killed from the server: it connects and listens again, and
      // the next hand-off is woken by the notification once more.
      const listeners = async (): Promise<number[]> =>
        (
          await adminQuery(
            'postgres',
            `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`,
            [applicationName],
          )
        ).map((row) => Number(row.pid));
      const [first, ...others] = await listeners();
      expect(first).toBeDefined();
      expect(others).toEqual([]); // one listening connection per backend
      expect(await killConnections('postgres', { ids: [first] })).toBe(1);
      const t0 = performance.now();
      let again: number[] = [];
      await within(
        (async () => {
          while ((again = await listeners()).length === 0) await sleep(50);
        })(),
        10_000,
        'a new listening connection',
      );
      timings.push(
        `listener killed: listening again after ${Math.round(performance.now() - t0)} ms`,
      );
      expect(again).toHaveLength(1);
      expect(again[0]).not.toBe(first);
      const after = await handOff(pgHolder, pg, `${prefix}k2`, 'k2', 1_500, 2_500);
      expect(after.attempts).toBeLessThanOrEqual(4);
      expect(after.afterReleaseMs).toBeLessThan(500);

      // close() ends the listening connection.
      await pg.close();
      await within(
        (async () => {
          while ((await listeners()).length > 0) await sleep(50);
        })(),
        5_000,
        'the listening connection to close',
      );
    } finally {
      for (const made of apps) await made.close();
      await pgTable.drop();
      await mariaTable.drop();
    }
  }, 60_000);
});

/** Connections of `applicationName` to the test database: each one's pid and last statement. */
async function connectionsOf(
  applicationName: string,
): Promise<Array<{ pid: number; query: string }>> {
  const rows = await adminQuery(
    'postgres',
    `SELECT pid, query FROM pg_stat_activity WHERE application_name = $1`,
    [applicationName],
  );
  return rows.map((row) => ({ pid: Number(row.pid), query: String(row.query) }));
}

describe('PostgreSQL table, releaseNotifications: false (PgBouncer transaction mode, capped hosts)', () => {
  it('opens no LISTEN connection; its waiters poll and still get a lock released by another backend; its releases still wake a listening waiter', async () => {
    const quiet = `ndl-quiet-${randomBytes(4).toString('hex')}`;
    const listening = `ndl-listen-${randomBytes(4).toString('hex')}`;
    const table = scratchTable('postgres', 'wait_quiet');
    const prefix = `quiet-${randomUUID()}:`;
    const apps: LockTestApp[] = [];
    const app = async (applicationName: string, extra: Partial<TypeormBackendConfig> = {}) => {
      const made = await createLockApp(
        typeormOptions(
          table.dataSourceOptions({ poolSize: 4, applicationName }),
          'table',
          table.name,
          prefix,
          extra,
        ),
      );
      apps.push(made);
      return made;
    };
    try {
      const polling = await app(quiet, { releaseNotifications: false });
      const holder = await app(`ndl-holder-${randomBytes(4).toString('hex')}`);

      // A waiter of the polling backend, its key held by another backend (as another process
      // would hold it): while it waits, no connection of its backend listens, and it has no
      // more connections than its pool.
      const held = await holder.locks.acquire('k');
      const takes = countTakes(`${prefix}k`);
      let waiter: Promise<Lock> | undefined;
      try {
        waiter = polling.locks.acquire('k', { waitTimeout: 20_000 });
        await sleep(1_500);
        const during = await connectionsOf(quiet);
        expect(during.length).toBeGreaterThan(0); // the waiter's own tries are counted here
        expect(during.length).toBeLessThanOrEqual(4);
        expect(during.filter((c) => /^\s*LISTEN\b/i.test(c.query))).toEqual([]);
        const t0 = performance.now();
        await held.release();
        const lock = await within(waiter, 5_000, 'the polling waiter');
        const afterReleaseMs = performance.now() - t0;
        const attempts = takes.count();
        timings.push(
          `releaseNotifications false, 1.5 s hold: ${attempts} take attempts, granted ${Math.round(afterReleaseMs)} ms after the release`,
        );
        // Polling: tries every 5-250 ms of back-off (a notified waiter makes at most 4, above),
        // and one within a back-off step of the release gets the key.
        expect(attempts).toBeGreaterThanOrEqual(8);
        expect(afterReleaseMs).toBeLessThan(500);
        expect(lock.fence as number).toBeGreaterThan(held.fence as number);

        // Its release is still announced: a waiter of a listening backend wakes at once.
        const listener = await app(listening);
        const notified = await handOff(polling, listener, `${prefix}k2`, 'k2', 1_500, 2_500);
        timings.push(
          `released by a releaseNotifications-false backend: listening waiter ${notified.attempts} take attempts (${Math.round(notified.afterReleaseMs)} ms)`,
        );
        expect(notified.attempts).toBeLessThanOrEqual(4);
        expect(notified.afterReleaseMs).toBeLessThan(500);
        await lock.release();
      } finally {
        takes.restore();
        if (waiter) await settle(waiter);
      }
      // Still no listening connection after its waits; the listening backend has exactly one.
      expect((await connectionsOf(quiet)).filter((c) => /^\s*LISTEN\b/i.test(c.query))).toEqual([]);
      expect(
        (await connectionsOf(listening)).filter((c) => /^\s*LISTEN\b/i.test(c.query)),
      ).toHaveLength(1);
    } finally {
      for (const made of apps) await made.close();
      await table.drop();
    }
  }, 60_000);

  it('is checked at bootstrap before any I/O, naming the field: a boolean, for strategy table', async () => {
    const base = {
      type: 'typeorm' as const,
      dataSourceOptions: dataSourceOptions('postgres', { poolSize: 4 }),
    };
    const refused = (config: Record<string, unknown>): Error => refusal({ ...base, ...config });
    for (const bad of ['false', 0, 1, null, {}]) {
      const err = refused({ releaseNotifications: bad });
      expect(err).toBeInstanceOf(LockConfigError);
      expect(err.message).toMatch(/backends\.db\.releaseNotifications.*true or false/);
    }
    for (const strategy of ['for-update', 'advisory']) {
      const err = refused({ releaseNotifications: false, strategy });
      expect(err).toBeInstanceOf(LockConfigError);
      expect(err.message).toMatch(/backends\.db\.releaseNotifications.*strategy "table"/);
    }
    for (const value of [true, false]) {
      expect(() =>
        sqlBackendFactory.validate({ ...base, releaseNotifications: value }, 'backends.db'),
      ).not.toThrow();
    }
    // Through the module, on a port nothing listens on: the option is refused before any
    // connection is tried (a connection error would be a LockBackendError).
    const boot = await settle(
      createLockApp(
        typeormOptions({ ...base.dataSourceOptions, port: 1 }, 'table', 'lock_conf', 'x:', {
          releaseNotifications: 'no' as unknown as boolean,
        }),
      ),
    );
    expect(boot.ok).toBe(false);
    if (!boot.ok) {
      expect(boot.error).toBeInstanceOf(LockConfigError);
      expect((boot.error as Error).message).toMatch(/backends\.db\.releaseNotifications/);
    }
  });
});
