/**
 * Shared and counted session locks (`for-update`, `advisory`) where the conformance battery
 * cannot see (issue 19): a holder process killed while it reads or holds a slot frees its hold
 * at once (the server ends its session); writer preference holds between two apps, each waiting
 * in the database; and readers and counted holders leave nothing behind: no key or slot rows in
 * the table, no advisory lock of the key, once they are gone. MariaDB advisory counted locks
 * (slot names and count marks) are checked against the names themselves.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { advisoryKey64 } from '../../lib/backends/sql/advisory.strategy';
import { mysqlCountMark, mysqlSlotPrefix } from '../../lib/backends/sql/mysql-advisory-slots';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { scratchTable, type DbKind, type ScratchTable } from '../../servers/databases';
import { settle, sleep, stillPendingAfter } from '../support/async';
import { startHolder } from '../support/holder-process';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions, withMariadbAdmin, type SqlStrategy } from '../support/typeorm-backend';

type ServerKind = Exclude<DbKind, 'sqlite'>;

/** Where readers are built, and where counted locks are. */
const SHARED: Array<[ServerKind, SqlStrategy]> = [
  ['postgres', 'for-update'],
  ['postgres', 'advisory'],
  ['mariadb', 'for-update'],
];
const COUNTED: Array<[ServerKind, SqlStrategy]> = [
  ['postgres', 'for-update'],
  ['postgres', 'advisory'],
  ['mariadb', 'for-update'],
  ['mariadb', 'advisory'],
];

/** How soon after a holder process dies its server-side session is gone, at most, ms. */
const SESSION_GONE_MS = 3_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** Module options on a table of its own (dropped after the test), and the table. */
function setup(kind: ServerKind, strategy: SqlStrategy): [LockModuleOptions, ScratchTable] {
  const scratch = scratchTable(kind, 'shr');
  cleanups.push(() => scratch.drop());
  const options = typeormOptions(
    scratch.dataSourceOptions({ poolSize: 12 }),
    strategy,
    scratch.name,
    `shr-${randomUUID().slice(0, 8)}:`,
  );
  return [options, scratch];
}

/**
 * Resolves once `inspect` of `key` (from `t`) counts a waiter in the database; fails if
 * `pending` settles first or nothing is seen waiting within 5 s.
 */
async function waitUntilQueued(
  t: LockTestApp,
  key: string,
  pending: Promise<unknown>,
): Promise<void> {
  const deadline = performance.now() + 5_000;
  for (;;) {
    expect(await stillPendingAfter(pending, 0)).toBe(true);
    if (((await t.locks.inspect(key))?.waiting ?? 0) > 0) return;
    if (performance.now() > deadline) throw new Error(`no waiter on ${key} seen in the database`);
    await sleep(20);
  }
}

async function app(options: LockModuleOptions): Promise<LockTestApp> {
  const t = await createLockApp(options);
  cleanups.push(() => t.close());
  return t;
}

describe('typeorm shared and counted session locks', () => {
  describe.each(SHARED)('%s %s', (kind, strategy) => {
    it('a reader whose process is killed frees its read hold: a writer gets in at once', async () => {
      const [options] = setup(kind, strategy);
      const holder = await startHolder({ options, key: 'victim', ttl: 5_000, mode: 'shared' });
      cleanups.push(async () => {
        holder.child.kill('SIGKILL');
        await holder.exited;
      });
      const t = await app(options);
      // Readers share it; a writer cannot have it.
      const reader = await t.locks.tryAcquire('victim', { mode: 'shared' });
      expect(reader).not.toBeNull();
      await reader!.release();
      expect(await t.locks.tryAcquire('victim')).toBeNull();
      holder.child.kill('SIGKILL');
      await holder.exited;
      const exitedAt = performance.now();
      const writer = await t.locks.acquire('victim', { waitTimeout: 10_000 });
      expect(performance.now() - exitedAt).toBeLessThan(SESSION_GONE_MS);
      expect(writer.fence).toBeGreaterThan(holder.held.fence!);
      await writer.release();
      expect(await t.locks.isLocked('victim')).toBe(false);
    }, 30_000);

    it('writer preference between two apps: a writer waiting in the database keeps new readers of the other app out', async () => {
      const [options] = setup(kind, strategy);
      const readers = await app(options);
      const writers = await app(options);
      const first = await readers.locks.acquire('doc', { mode: 'shared' });
      const writer = settle(writers.locks.acquire('doc', { waitTimeout: 10_000 }));
      // Once the database shows the writer waiting (on a loaded host that takes a while), the
      // other app's new readers wait behind it.
      await waitUntilQueued(readers, 'doc', writer);
      expect(await readers.locks.tryAcquire('doc', { mode: 'shared' })).toBeNull();
      const late = settle(readers.locks.acquire('doc', { mode: 'shared', waitTimeout: 10_000 }));
      expect(await stillPendingAfter(late, 200)).toBe(true);
      await first.release();
      const granted = await writer;
      expect(granted).toMatchObject({ ok: true });
      const w = (granted as { value: Awaited<ReturnType<typeof writers.locks.acquire>> }).value;
      expect(await stillPendingAfter(late, 100)).toBe(true);
      await w.release();
      const next = await late;
      expect(next).toMatchObject({ ok: true });
      const r = (next as { value: typeof first }).value;
      expect(r.fence).toBeGreaterThan(w.fence!);
      await r.release();
    }, 30_000);
  });

  describe.each(COUNTED)('%s %s', (kind, strategy) => {
    it('a slot holder whose process is killed frees its slot: the next taker gets that slot', async () => {
      const [options] = setup(kind, strategy);
      const holder = await startHolder({ options, key: 'pool', ttl: 5_000, permits: 2 });
      cleanups.push(async () => {
        holder.child.kill('SIGKILL');
        await holder.exited;
      });
      expect(holder.held.permit).toBe(0);
      const t = await app(options);
      const mine = await t.locks.acquire('pool', { permits: 2 });
      expect(mine.permit).toBe(1);
      expect(await t.locks.tryAcquire('pool', { permits: 2 })).toBeNull();
      expect(await t.locks.inspect('pool')).toMatchObject({
        holders: 2,
        permits: 2,
        slots: [0, 1],
      });
      holder.child.kill('SIGKILL');
      await holder.exited;
      const exitedAt = performance.now();
      const next = await t.locks.acquire('pool', { permits: 2, waitTimeout: 10_000 });
      expect(performance.now() - exitedAt).toBeLessThan(SESSION_GONE_MS);
      expect(next.permit).toBe(0);
      expect(next.fence).toBeGreaterThan(holder.held.fence!);
      await mine.release();
      await next.release();
      expect(await t.locks.isLocked('pool')).toBe(false);
    }, 30_000);
  });

  describe('mariadb advisory: counted locks on slot names', () => {
    /** How many of `key`'s 64 slot names and of its count marks for `permits` are held now. */
    async function namesHeld(key: string, permits: number): Promise<number> {
      return withMariadbAdmin(async (admin) => {
        const names = Array.from({ length: 64 }, (_, i) => [
          `${mysqlSlotPrefix(key)}${i}`,
          mysqlCountMark(key, permits, i),
        ]).flat();
        const [rows] = await admin.query(
          `SELECT ${names.map(() => '(IS_USED_LOCK(?) IS NOT NULL)').join(' + ')} AS held`,
          names,
        );
        return Number((rows as Array<{ held: unknown }>)[0].held);
      });
    }

    it('a slot held without its count mark (a session half gone) is looked at again, and refused only if it stays', async () => {
      const [options] = setup('mariadb', 'advisory');
      const t = await app(options);
      const key = `${options.keyPrefix}pool`;
      const slot1 = `${mysqlSlotPrefix(key)}1`;
      await withMariadbAdmin(async (admin) => {
        // Gone within the check's second look: the taker is granted, not refused.
        await admin.query('SELECT GET_LOCK(?, 0)', [slot1]);
        const taking = settle(t.locks.tryAcquire('pool', { permits: 2 }));
        await sleep(40);
        await admin.query('SELECT RELEASE_LOCK(?)', [slot1]);
        const granted = await taking;
        expect(granted).toMatchObject({ ok: true });
        const lock = (granted as { value: Awaited<ReturnType<typeof t.locks.tryAcquire>> }).value;
        expect(lock?.permit).toBe(0);
        await lock!.release();
        // Still there after every look: refused, and the taker holds nothing of the key.
        await admin.query('SELECT GET_LOCK(?, 0)', [slot1]);
        await expect(t.locks.tryAcquire('pool', { permits: 2 })).rejects.toMatchObject({
          name: 'LockConfigError',
          field: 'permits',
        });
        await admin.query('SELECT RELEASE_LOCK(?)', [slot1]);
      });
      expect(await namesHeld(key, 2)).toBe(0);
      expect(await t.locks.isLocked('pool')).toBe(false);
    }, 30_000);

    it('a mutex and a counted request taking at once are never both admitted, and the refused leave nothing', async () => {
      const [options] = setup('mariadb', 'advisory');
      const mutexApp = await app(options);
      const countedApp = await app(options);
      let granted = 0;
      for (let round = 0; round < 30; round++) {
        // The mutex starts 0 to 5 ms after the counted request: each side's check meets the other
        // at every stage of its take.
        const [mutex, counted] = await Promise.all([
          sleep(round % 6).then(() => settle(mutexApp.locks.tryAcquire('race'))),
          settle(countedApp.locks.tryAcquire('race', { permits: 2 })),
        ]);
        const held = [mutex, counted].flatMap((r) => (r.ok && r.value ? [r.value] : []));
        // Each is granted, busy, or refused for disagreeing; never both granted.
        expect(held.length).toBeLessThanOrEqual(1);
        for (const r of [mutex, counted]) {
          if (!r.ok) expect(r.error).toMatchObject({ name: 'LockConfigError', field: 'permits' });
        }
        granted += held.length;
        for (const lock of held) await lock.release();
      }
      expect(granted).toBeGreaterThan(0);
      const key = `${options.keyPrefix}race`;
      expect(await namesHeld(key, 2)).toBe(0);
      expect(await mutexApp.locks.isLocked('race')).toBe(false);
    }, 60_000);

    it('counted holders of one key share out its slots and leave no name behind', async () => {
      const [options] = setup('mariadb', 'advisory');
      const t = await app(options);
      let most = 0;
      let now = 0;
      await Promise.all(
        Array.from({ length: 6 }, async () => {
          for (let round = 0; round < 4; round++) {
            await t.locks.withLock(
              'shelf',
              async () => {
                most = Math.max(most, ++now);
                await sleep(5 + Math.random() * 10);
                now--;
              },
              { permits: 3, waitTimeout: 15_000 },
            );
          }
        }),
      );
      expect(most).toBe(3);
      expect(await namesHeld(`${options.keyPrefix}shelf`, 3)).toBe(0);
      expect(await t.locks.inspect('shelf')).toMatchObject({ held: false, holders: 0 });
    }, 60_000);
  });

  describe('postgres advisory: who is a reader', () => {
    // A session that dies gives its locks back one lock-table partition at a time, so a counted
    // holder killed mid-hold can for a moment share the key's lock without its slot. A counted
    // waiter granted that slot then checks the key: it must not take that for a reader (it did,
    // and refused itself, in the chaos row "slot holder kill -9"). A reader is known by its mark.
    it('a session sharing the key without a slot (a counted holder half gone) is not a reader; a reader’s mark is', async () => {
      const [options, scratch] = setup('postgres', 'advisory');
      const raw = new DataSource({ ...scratch.dataSourceOptions(), type: 'postgres' } as never);
      await raw.initialize();
      cleanups.push(() => raw.destroy());
      const runner = raw.createQueryRunner();
      await runner.connect();
      cleanups.push(() => runner.release());
      const t = await app(options);
      const key = `${options.keyPrefix}pool`;
      await runner.query('SELECT pg_advisory_lock_shared($1::bigint)', [advisoryKey64(key)]);
      const counted = await t.locks.acquire('pool', { permits: 2 });
      expect(counted.permit).toBe(0);
      await counted.release();
      // A reader (the key's share and its mark): a counted request now disagrees.
      const reader = await t.locks.acquire('pool', { mode: 'shared' });
      await expect(t.locks.tryAcquire('pool', { permits: 2 })).rejects.toMatchObject({
        name: 'LockConfigError',
        field: 'permits',
      });
      await reader.release();
      await runner.query('SELECT pg_advisory_unlock_shared($1::bigint)', [advisoryKey64(key)]);
      expect(await t.locks.isLocked('pool')).toBe(false);
    }, 30_000);
  });

  describe.each(SHARED)('%s %s footprint', (kind, strategy) => {
    it('readers and counted holders leave no row and no lock behind', async () => {
      const [options, scratch] = setup(kind, strategy);
      const t = await app(options);
      const counted = COUNTED.some(([k, s]) => k === kind && s === strategy);
      // 3 keys x 3 workers: at most 9 pinned connections (the pool leaves 11).
      const keys = Array.from({ length: 3 }, (_, i) => `fp-${i}`);
      await Promise.all(
        keys.flatMap((key, i) =>
          Array.from({ length: 3 }, async (_, worker) => {
            for (let round = 0; round < 3; round++) {
              const opts =
                counted && i % 2 === 1
                  ? { permits: 3 }
                  : worker === 0 && round === 1
                    ? {}
                    : { mode: 'shared' as const };
              await t.locks.withLock(key, () => sleep(5 + Math.random() * 10), {
                ...opts,
                waitTimeout: 15_000,
              });
            }
          }),
        ),
      );
      for (const key of keys) {
        expect(await t.locks.isLocked(key)).toBe(false);
        expect(await t.locks.inspect(key)).toMatchObject({ held: false, holders: 0 });
      }
      const ds = new DataSource(scratch.dataSourceOptions({ poolSize: 2 }) as never);
      await ds.initialize();
      cleanups.push(() => ds.destroy());
      const quoted = kind === 'mariadb' ? `\`${scratch.name}\`` : `"${scratch.name}"`;
      // Fence buckets (reserved rows, '~…') stay; no key or slot row does.
      const rows = (await ds.query(
        `SELECT key_text FROM ${quoted} WHERE lock_key NOT LIKE '~%'`,
      )) as Array<{ key_text: unknown }>;
      expect(rows.map((r) => r.key_text)).toEqual([]);
    }, 60_000);
  });
});
