import { describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { storedKey } from '../../lib/backends/sql/sql-dialect';
import {
  LockBackendError,
  LockLostError,
  LockNotAcquiredError,
} from '../../lib/errors/lock.errors';
import {
  createMariadbUser,
  dataSourceOptions,
  killConnections,
  scratchTable,
  type DbKind,
  type MariadbUser,
} from '../../servers/databases';
import { expectTakeoverAfterSigkill } from '../support/holder-process';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { typeormOptions } from '../support/typeorm-backend';

type Strategy = 'table' | 'for-update' | 'advisory';
type ServerKind = Exclude<DbKind, 'sqlite'>;

const now = () => performance.now();

/** Resolves the holder's abort reason and when it fired, or `undefined` after `ms`. */
function abortWithin(
  signal: AbortSignal,
  ms: number,
): Promise<{ reason: unknown; at: number } | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    const done = () => {
      clearTimeout(timer);
      resolve({ reason: signal.reason, at: now() });
    };
    if (signal.aborted) done();
    else signal.addEventListener('abort', done, { once: true });
  });
}

/** Runs `work` with a throwaway MariaDB user (createMariadbUser), dropped afterwards. */
async function withMariadbUser<T>(work: (user: MariadbUser) => Promise<T>): Promise<T> {
  const user = await createMariadbUser();
  try {
    return await work(user);
  } finally {
    await user.drop().catch(() => undefined);
  }
}

/**
 * A holder process holding 'victim' with `strategy` on `kind` (its own table) is SIGKILLed; an
 * app on the same table must take the key over within the bounds (expectTakeoverAfterSigkill).
 */
async function killedHolderTakeover(
  kind: DbKind,
  strategy: Strategy,
  bounds: { ttl: number; waitTimeoutMs: number; withinMs: number },
): Promise<void> {
  const table = scratchTable(kind, 'fault_kill');
  try {
    await expectTakeoverAfterSigkill(
      typeormOptions(table.dataSourceOptions(), strategy, table.name, `kill-${randomUUID()}:`),
      bounds,
    );
  } finally {
    await table.drop();
  }
}

describe('typeorm faults: a holder process killed with SIGKILL', () => {
  const ttl = 1_500;

  for (const kind of ['postgres', 'mariadb', 'sqlite'] as const) {
    it(`table on ${kind}: the key is free again within ttl + 1 s of the exit`, async () => {
      await killedHolderTakeover(kind, 'table', {
        ttl,
        waitTimeoutMs: ttl + 5_000,
        withinMs: ttl + 1_000,
      });
    }, 30_000);
  }

  for (const strategy of ['for-update', 'advisory'] as const) {
    for (const kind of ['postgres', 'mariadb'] as const) {
      it(`${strategy} on ${kind}: the database frees the key within 1 s of the exit (ttl 30 s)`, async () => {
        await killedHolderTakeover(kind, strategy, {
          ttl: 30_000,
          waitTimeoutMs: 5_000,
          withinMs: 1_000,
        });
      }, 30_000);
    }
  }
});

describe('typeorm faults: the holder’s connection killed from the server side', () => {
  /**
   * App A acquires; `kill` terminates A's connections (the pinned one among them); A's signal
   * must abort with LockLostError within 2 s, and an app B started afterwards gets the key.
   */
  async function killedHolder(
    kind: ServerKind,
    strategy: 'for-update' | 'advisory',
    dataSourceA: Record<string, unknown>,
    kill: () => Promise<number>,
  ): Promise<void> {
    const table = scratchTable(kind, 'fault_srv');
    const keyPrefix = `srv-${randomUUID()}:`;
    let a: LockTestApp | undefined;
    let b: LockTestApp | undefined;
    try {
      a = await createLockApp(typeormOptions(dataSourceA, strategy, table.name, keyPrefix));
      const held = await a.locks.acquire('victim', { ttl: 30_000 });
      const lost = abortWithin(held.signal, 5_000);
      const killStarted = now();
      expect(await kill()).toBeGreaterThanOrEqual(1);
      const outcome = await lost;
      expect(outcome).toBeDefined();
      expect(outcome!.at - killStarted).toBeLessThanOrEqual(2_000);
      expect(outcome!.reason).toBeInstanceOf(LockLostError);
      expect(held.isHeld()).toBe(false);

      b = await createLockApp(
        typeormOptions(table.dataSourceOptions(), strategy, table.name, keyPrefix),
      );
      const lock = await b.locks.acquire('victim', { waitTimeout: 5_000 });
      expect(lock.isHeld()).toBe(true);
      expect(lock.fence).toBeGreaterThan(held.fence!);
      await lock.release();
    } finally {
      await a?.close();
      await b?.close();
      await table.drop();
    }
  }

  for (const strategy of ['for-update', 'advisory'] as const) {
    it(`${strategy} on postgres: pg_terminate_backend aborts the signal; another app acquires`, async () => {
      const applicationName = `ndl-fault-${randomBytes(4).toString('hex')}`;
      await killedHolder(
        'postgres',
        strategy,
        dataSourceOptions('postgres', { applicationName }),
        () => killConnections('postgres', { applicationName }),
      );
    }, 30_000);

    it(`${strategy} on mariadb: KILL CONNECTION aborts the signal; another app acquires`, async () => {
      await withMariadbUser(({ username, password, kill }) =>
        killedHolder(
          'mariadb',
          strategy,
          { ...dataSourceOptions('mariadb'), username, password },
          kill,
        ),
      );
    }, 30_000);
  }
});

describe('typeorm faults: session locks cannot exhaust the pool', () => {
  it('for-update on postgres, pool size 3: two locks hold, a third fails fast with a pool error, then works after a release', async () => {
    const table = scratchTable('postgres', 'fault_pool');
    let t: LockTestApp | undefined;
    try {
      t = await createLockApp(
        typeormOptions(
          table.dataSourceOptions({ poolSize: 3 }),
          'for-update',
          table.name,
          `pool-${randomUUID()}:`,
        ),
      );
      const one = await t.locks.acquire('cap-1');
      const two = await t.locks.acquire('cap-2');
      // The connection kept for ordinary queries still answers.
      expect(await t.locks.isLocked('cap-1')).toBe(true);

      const started = now();
      const err = await t.locks.acquire('cap-3', { waitTimeout: 5_000 }).then(
        (lock) => lock,
        (e: unknown) => e,
      );
      const took = now() - started;
      expect(err).toBeInstanceOf(LockBackendError);
      expect((err as Error).message).toMatch(/pool/);
      expect(took).toBeLessThan(1_000);
      expect(one.isHeld()).toBe(true);
      expect(two.isHeld()).toBe(true);

      await one.release();
      const three = await t.locks.acquire('cap-3', { waitTimeout: 2_000 });
      expect(three.isHeld()).toBe(true);
      await three.release();
      await two.release();
    } finally {
      await t?.close();
      await table.drop();
    }
  }, 30_000);
});

describe('typeorm faults: several instances using a fresh table for the first time at once', () => {
  // Replicas booting together with createTable: true all create the table on first use, each on
  // its own connection. Every one of them must get a normal answer: exactly one lock, no errors.
  for (const kind of ['postgres', 'mariadb', 'sqlite'] as const) {
    it(`table on ${kind}: 8 apps racing createTable all answer, exactly one gets the lock`, async () => {
      const table = scratchTable(kind, 'fault_ddl');
      const options = typeormOptions(
        table.dataSourceOptions({ poolSize: 2 }), // sqlite: one connection, whatever the size
        'table',
        table.name,
        `ddl-${randomUUID()}:`,
      );
      const apps: LockTestApp[] = [];
      try {
        for (let i = 0; i < 8; i++) apps.push(await createLockApp(options));
        const results = await Promise.allSettled(apps.map((app) => app.locks.tryAcquire('first')));
        const errors = results.flatMap((r) =>
          r.status === 'rejected' ? [String((r.reason as Error)?.message ?? r.reason)] : [],
        );
        expect(errors).toEqual([]);
        const granted = results.filter((r) => r.status === 'fulfilled' && r.value !== null);
        expect(granted).toHaveLength(1);
      } finally {
        for (const app of apps) await app.close();
        await table.drop();
      }
    }, 30_000);
  }
});

describe('typeorm for-update on mariadb: a key row another session is making', () => {
  // Waiters remake the row a releasing holder deleted. A caller that saw no row and inserts it
  // while another session has just made it (not yet committed, or made and locked) waits on
  // InnoDB's duplicate check for that session, by default for 50 s whatever the caller asked.
  // Here the other session is a raw transaction holding its uncommitted insert of the row.
  it('a try answers busy at once, a wait lasts what it was given, and the key is taken once the row is free', async () => {
    const table = scratchTable('mariadb', 'fault_insert');
    const prefix = `ins-${randomUUID()}:`;
    const t = await createLockApp(
      typeormOptions(table.dataSourceOptions(), 'for-update', table.name, prefix),
    );
    const raw = new DataSource(dataSourceOptions('mariadb') as never);
    await raw.initialize();
    const other = raw.createQueryRunner();
    try {
      await (await t.locks.acquire('warm-up')).release(); // the table exists
      await other.connect();
      await other.startTransaction();
      await other.query(
        `INSERT INTO \`${table.name}\` (lock_key, key_text, fence) VALUES (?, ?, 0)`,
        [storedKey(`${prefix}k`), `${prefix}k`],
      );

      let started = now();
      expect(await t.locks.tryAcquire('k')).toBeNull();
      expect(now() - started).toBeLessThan(1_000);

      started = now();
      await expect(t.locks.acquire('k', { waitTimeout: 1_500 })).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
      const waited = now() - started;
      expect(waited).toBeGreaterThanOrEqual(1_400);
      expect(waited).toBeLessThan(4_000);

      const waiter = t.locks.acquire('k', { waitTimeout: 10_000 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await other.rollbackTransaction(); // the row never existed: the waiter makes it
      const lock = await waiter;
      expect(lock.isHeld()).toBe(true);
      await lock.release();
    } finally {
      if (other.isTransactionActive) await other.rollbackTransaction().catch(() => undefined);
      await other.release();
      await raw.destroy();
      await t.close();
      await table.drop();
    }
  }, 30_000);
});
