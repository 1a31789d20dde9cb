/**
 * Shared and counted locks of the typeorm `table` strategy (issue 19) on the real databases,
 * where the conformance battery cannot look: the rows they leave (none once the holders are gone,
 * besides the fence buckets and the layout row, including after holders that died), a slot and a
 * read hold whose holder stopped renewing taken over by the next holder, and writer preference
 * between two apps (processes) sharing the table.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { scratchTable, type DbKind } from '../../servers/databases';
import { settle, sleep, stillPendingAfter, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions } from '../support/typeorm-backend';

const KINDS: readonly DbKind[] = ['postgres', 'mariadb', 'sqlite'];
/** Generous bound for "at once" on a loaded 2-core machine. */
const QUICK_MS = 1_500;
const PREFIX = 'ts:';

const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close().catch(() => undefined);
});

/** Two apps (as two processes would be) on one table, and a DataSource of the test's on it. */
async function fixture(kind: DbKind): Promise<{
  readonly apps: readonly [LockTestApp, LockTestApp];
  readonly backend: LockBackend;
  /** Rows of lock keys (not the fence buckets nor the layout row). */
  keyRows(): Promise<number>;
}> {
  const scratch = scratchTable(kind, 'tshare');
  const ds = new DataSource(scratch.dataSourceOptions({ poolSize: 4 }) as never);
  await ds.initialize();
  open.push(async () => {
    await ds.destroy();
    await scratch.drop();
  });
  const options = typeormOptions(
    scratch.dataSourceOptions({ poolSize: 10 }),
    'table',
    scratch.name,
    PREFIX,
  );
  const first = await createLockApp(options);
  open.push(() => first.close());
  const second = await createLockApp(options);
  open.push(() => second.close());
  const table = kind === 'mariadb' ? `\`${scratch.name}\`` : `"${scratch.name}"`;
  return {
    apps: [first, second],
    backend: first.manager.getBackend('db'),
    keyRows: async () => {
      const rows = (await ds.query(
        `SELECT COUNT(*) AS n FROM ${table} WHERE lock_key NOT LIKE '~%'`,
      )) as Array<{ n: unknown }>;
      return Number(rows[0].n);
    },
  };
}

describe.each(KINDS)('typeorm table on %s: shared and counted locks', (kind) => {
  it('leaves no row of a key once its readers, slots and waiting writer are gone', async () => {
    const { apps, keyRows } = await fixture(kind);
    const [a, b] = apps;
    const readers = [
      await a.locks.acquire('rw', { mode: 'shared' }),
      await b.locks.acquire('rw', { mode: 'shared' }),
      await a.locks.acquire('rw', { mode: 'shared' }),
    ];
    const slots = [
      await a.locks.acquire('sem', { permits: 3 }),
      await b.locks.acquire('sem', { permits: 3 }),
    ];
    expect(slots.map((lock) => lock.permit).sort()).toEqual([0, 1]);
    // A writer waits (marking the key), then gives up (taking its mark away).
    const writer = await settle(b.locks.acquire('rw', { waitTimeout: 400 }));
    expect(writer.ok).toBe(false);
    // The key's row and one row per holder.
    expect(await keyRows()).toBe(1 + 3 + 1 + 2);
    expect(await a.locks.inspect('rw')).toMatchObject({ held: true, holders: 3, mode: 'shared' });
    expect(await a.locks.inspect('sem')).toMatchObject({
      holders: 2,
      mode: 'exclusive',
      permits: 3,
      slots: [0, 1],
    });
    for (const lock of [...readers, ...slots]) await lock.release();
    expect(await keyRows()).toBe(0);
    // Readers with a writer between them, and force-released ones: nothing left either.
    const r = await a.locks.acquire('rw', { mode: 'shared' });
    const w = b.locks.acquire('rw', { waitTimeout: 10_000 });
    await sleep(200);
    await r.release();
    await (await w).release();
    await b.locks.acquire('sem', { permits: 3 });
    await a.locks.acquire('sem', { permits: 3 });
    expect(await a.locks.forceRelease('sem')).toBe(true);
    expect(await keyRows()).toBe(0);
  }, 60_000);

  it('takes over a slot and a read hold whose holders died, and deletes their rows', async () => {
    const { apps, backend, keyRows } = await fixture(kind);
    const [a] = apps;
    // Taken straight on the store, as by a process that died holding them.
    const dead = (key: string, extra: object) =>
      backend.tryAcquire({ key: PREFIX + key, token: randomUUID(), ttlMs: 400, ...extra });
    const deadSlots = [await dead('sem', { permits: 2 }), await dead('sem', { permits: 2 })];
    expect(deadSlots.map((grant) => grant?.permit)).toEqual([0, 1]);
    const deadReader = await dead('rw', { mode: 'shared' });
    expect(await a.locks.tryAcquire('sem', { permits: 2 })).toBeNull();
    expect(await a.locks.tryAcquire('rw')).toBeNull();
    await sleep(500);
    const slot = await a.locks.acquire('sem', { permits: 2, waitTimeout: 0 });
    expect(slot.permit).toBe(0);
    expect(slot.fence as number).toBeGreaterThan(deadSlots[1]!.fence as number);
    // The other dead slot's row went with the take.
    expect(await a.locks.inspect('sem')).toMatchObject({ holders: 1, slots: [0] });
    const reader = await a.locks.acquire('rw', { mode: 'shared', waitTimeout: 0 });
    expect(reader.fence as number).toBeGreaterThan(deadReader!.fence as number);
    expect(await a.locks.inspect('rw')).toMatchObject({ holders: 1, mode: 'shared' });
    expect(await keyRows()).toBe(4);
    await slot.release();
    await reader.release();
    expect(await keyRows()).toBe(0);
  }, 60_000);

  it('a writer of another app is let in before new readers, which then go on', async () => {
    const { apps } = await fixture(kind);
    const [readersApp, writerApp] = apps;
    const first = await readersApp.locks.acquire('rw', { mode: 'shared' });
    const writer = settle(writerApp.locks.acquire('rw', { waitTimeout: 20_000 }));
    // Once the writer waits, a new reader of the other app waits behind it.
    await sleep(400);
    expect(await readersApp.locks.tryAcquire('rw', { mode: 'shared' })).toBeNull();
    const late = settle(readersApp.locks.acquire('rw', { mode: 'shared', waitTimeout: 20_000 }));
    expect(await stillPendingAfter(late, 200)).toBe(true);
    await first.release();
    const granted = await within(writer, QUICK_MS * 3, 'the writer');
    if (!granted.ok) throw granted.error;
    const held = granted.value;
    expect(held.mode).toBe('exclusive');
    expect(await stillPendingAfter(late, 100)).toBe(true);
    await held.release();
    const next = await within(late, QUICK_MS * 3, 'the reader behind the writer');
    if (!next.ok) throw next.error;
    const reader = next.value;
    expect(reader.fence as number).toBeGreaterThan(held.fence as number);
    await reader.release();
  }, 60_000);
});
