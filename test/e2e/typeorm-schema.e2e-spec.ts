import { describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockBackendError, LockConfigError } from '../../lib/index';
import { createDistributedLockMigration, DistributedLockEntity } from '../../lib/typeorm/index';
import {
  dataSourceOptions,
  dropTable,
  tempSqliteFile,
  uniqueTableName,
  type DbKind,
} from '../../servers/databases';
import { createLockApp } from '../support/lock-app';
import { lateDataSource } from '../support/late-data-source';

describe.each<DbKind>(['postgres', 'mariadb', 'sqlite'])('typeorm schema on %s', (kind) => {
  it('the shipped migration creates a table the backend uses as is, and drops it on revert', async () => {
    const tableName = uniqueTableName('mig');
    const sqlite = kind === 'sqlite' ? tempSqliteFile() : undefined;
    const ds = new DataSource({
      ...dataSourceOptions(kind, sqlite ? { sqliteFile: sqlite.file } : {}),
      migrations: [createDistributedLockMigration(tableName)],
    } as never);
    await ds.initialize();
    try {
      await ds.runMigrations();
      const t = await createLockApp({
        backends: { db: { type: 'typeorm', dataSource: ds, tableName } },
      });
      const lock = await t.locks.acquire('migrated', { ttl: 5_000 });
      expect(typeof lock.fence).toBe('number');
      await lock.release();
      await t.close();
      expect(ds.isInitialized).toBe(true); // a DataSource you pass is never destroyed by the module
      await ds.undoLastMigration();
      const err = await createLockApp({
        backends: { db: { type: 'typeorm', dataSource: ds, tableName } },
      }).then(async (app) => {
        try {
          return await app.locks.acquire('gone', { waitTimeout: 0 }).catch((e: unknown) => e);
        } finally {
          await app.close();
        }
      });
      expect(err).toBeInstanceOf(LockBackendError);
      expect(String((err as Error).message)).toMatch(
        /does not exist: run the shipped migration, or set createTable: true/,
      );
    } finally {
      await ds.destroy();
      await dropTable(kind, tableName, sqlite?.file).catch(() => undefined);
      sqlite?.cleanup();
    }
  }, 30_000);
});

describe('typeorm entity and configuration', () => {
  it('the exported entity, synchronized by TypeORM, is a table the backend can use', async () => {
    const sqlite = tempSqliteFile();
    const ds = new DataSource({
      ...dataSourceOptions('sqlite', { sqliteFile: sqlite.file }),
      entities: [DistributedLockEntity],
      synchronize: true,
    } as never);
    await ds.initialize();
    try {
      const t = await createLockApp({ backends: { db: { type: 'typeorm', dataSource: ds } } });
      const lock = await t.locks.acquire('entity-key');
      expect(await t.locks.isLocked('entity-key')).toBe(true);
      const held = await ds.getRepository(DistributedLockEntity).find();
      const keyRow = held.find((r) => r.keyText === 'entity-key');
      expect(Number(keyRow?.fence)).toBe(lock.fence);
      await lock.release();
      await t.close();
      // Released: the key's row is gone; its fence counter and the layout row stay.
      const rows = await ds.getRepository(DistributedLockEntity).find();
      expect(rows.map((r) => r.keyText)).not.toContain('entity-key');
      expect(rows.map((r) => r.lockKey.trim()).sort()).toEqual(
        ['~fence:meta', expect.stringMatching(/^~fence:bucket:\d+$/)].sort(),
      );
    } finally {
      await ds.destroy();
      sqlite.cleanup();
    }
  });

  it('resolves a DataSource from Nest DI by token, lazily, and does not destroy it', async () => {
    const tableName = uniqueTableName('tok');
    const ds = new DataSource(dataSourceOptions('postgres') as never);
    @Module({ providers: [{ provide: 'LOCK_DS', useValue: ds }], exports: ['LOCK_DS'] })
    class DbModule {}
    try {
      const t = await createLockApp(
        {
          backends: {
            db: {
              type: 'typeorm',
              dataSourceToken: 'LOCK_DS',
              tableName,
              createTable: true,
              strategy: 'for-update',
            },
          },
        },
        { imports: [DbModule] },
      );
      const lock = await t.locks.acquire('via-token');
      expect(lock.isHeld()).toBe(true);
      await lock.release();
      await t.close();
      expect(ds.isInitialized).toBe(true);
    } finally {
      if (ds.isInitialized) await ds.destroy();
      await dropTable('postgres', tableName);
    }
  });

  it('resolves a DataSource provider that DI creates asynchronously (looked up on first use)', async () => {
    const tableName = uniqueTableName('late');
    const late = lateDataSource('LATE_DS');
    try {
      const t = await createLockApp(
        {
          backends: {
            db: {
              type: 'typeorm',
              dataSourceToken: 'LATE_DS',
              tableName,
              createTable: true,
              strategy: 'advisory',
            },
          },
        },
        { imports: [late.module] },
      );
      const lock = await t.locks.acquire('late-key');
      expect(lock.isHeld()).toBe(true);
      await lock.release();
      await t.close();
    } finally {
      await late.destroy();
      await dropTable('postgres', tableName);
    }
  });

  it('for-update on a DataSource DI creates late still queues waiters in the database', async () => {
    const tableName = uniqueTableName('lateq');
    const late = lateDataSource('LATE_QUEUE_DS');
    try {
      const t = await createLockApp(
        {
          backends: {
            db: {
              type: 'typeorm',
              dataSourceToken: 'LATE_QUEUE_DS',
              tableName,
              createTable: true,
              strategy: 'for-update',
            },
          },
        },
        { imports: [late.module] },
      );
      try {
        expect(t.manager.getBackend('db').capabilities.waiting).toBe('queue');
        const holder = await t.locks.acquire('queued', { ttl: 10_000 });
        const waiter = t.locks.acquire('queued', { ttl: 10_000, waitTimeout: 10_000 });
        waiter.catch(() => undefined); // awaited below; a failed check must not leave it unhandled
        // The waiter's SELECT ... FOR UPDATE waits on the row lock in the database (a poller
        // would only ever send NOWAIT attempts, never seen waiting on a lock).
        const waitingInDatabase = async (): Promise<boolean> => {
          const rows = (await late
            .created()!
            .query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
              [`%${tableName}%FOR UPDATE%`],
            )) as Array<{ n: number }>;
          return rows[0].n === 1;
        };
        let seen = false;
        for (const stop = Date.now() + 5_000; !seen && Date.now() < stop;) {
          seen = await waitingInDatabase();
          if (!seen) await new Promise((r) => setTimeout(r, 50));
        }
        expect(seen).toBe(true);
        await holder.release();
        const lock = await waiter;
        expect(lock.isHeld()).toBe(true);
        expect(lock.fence).toBeGreaterThan(holder.fence!);
        await lock.release();
      } finally {
        await t.close();
      }
    } finally {
      await late.destroy();
      await dropTable('postgres', tableName);
    }
  }, 30_000);

  it('refuses strategies a database cannot support, and bad table names, at bootstrap', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'better-sqlite3', database: ':memory:' },
          strategy: 'for-update',
        },
        'backends.db.dataSourceOptions.type',
      ],
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'better-sqlite3', database: ':memory:' },
          strategy: 'advisory',
        },
        'backends.db.dataSourceOptions.type',
      ],
      [
        { type: 'typeorm', dataSourceOptions: { type: 'mongodb' } },
        'backends.db.dataSourceOptions.type',
      ],
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'postgres' },
          tableName: 'locks; DROP TABLE x',
        },
        'backends.db.tableName',
      ],
      [
        { type: 'typeorm', dataSourceOptions: { type: 'postgres' }, strategy: 'optimistic' },
        'backends.db.strategy',
      ],
      [{ type: 'typeorm' }, 'backends.db'],
      [{ type: 'typeorm', dataSource: {} }, 'backends.db.dataSource'],
      // SQLite keeps every sqlite_* name (any case) for its own tables.
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'better-sqlite3', database: ':memory:' },
          tableName: 'sqlite_master',
        },
        'backends.db.tableName',
      ],
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'sqlite', database: ':memory:' },
          tableName: 'SQLITE_stat1',
        },
        'backends.db.tableName',
      ],
      [
        {
          type: 'typeorm',
          dataSource: new DataSource({ type: 'better-sqlite3', database: ':memory:' }),
          tableName: 'sqlite_sequence',
        },
        'backends.db.tableName',
      ],
      [
        { type: 'typeorm', dataSourceOptions: { type: 'postgres' }, startup: 'later' },
        'backends.db.startup',
      ],
      [
        {
          type: 'typeorm',
          dataSource: new DataSource({ type: 'better-sqlite3', database: ':memory:' }),
          startup: 'degraded',
        },
        'backends.db.startup',
      ],
      [
        {
          type: 'typeorm',
          dataSourceOptions: { type: 'postgres' },
          strategy: 'advisory',
          sessionTimeout: 500,
        },
        'backends.db.sessionTimeout',
      ],
      [
        { type: 'typeorm', dataSourceOptions: { type: 'postgres' }, sessionTimeout: 5_000 },
        'backends.db.sessionTimeout',
      ],
    ];
    for (const [config, field] of cases) {
      const err = await createLockApp({ backends: { db: config as never } }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LockConfigError);
      expect((err as LockConfigError).field).toBe(field);
    }
  });

  it('a MariaDB server reached with type "mysql" is told by the server: for-update runs, its waiters queue in the database', async () => {
    const tableName = uniqueTableName('as_mysql');
    const options = { ...dataSourceOptions('mariadb'), type: 'mysql' };
    const passed = new DataSource(options as never);
    await passed.initialize();
    try {
      for (const db of [
        { type: 'typeorm', dataSourceOptions: options }, // checked at bootstrap, once connected
        { type: 'typeorm', dataSource: passed }, // initialized already: checked at bootstrap too
      ] as const) {
        const t = await createLockApp({
          backends: { db: { ...db, strategy: 'for-update', tableName, createTable: true } },
        });
        try {
          expect(t.manager.getBackend('db').capabilities.waiting).toBe('queue');
          const holder = await t.locks.acquire('as-mysql');
          const waiter = t.locks.acquire('as-mysql', { waitTimeout: 10_000 });
          waiter.catch(() => undefined); // awaited below
          let waiting = 0;
          for (const stop = Date.now() + 5_000; waiting < 1 && Date.now() < stop;) {
            waiting = (await t.locks.inspect('as-mysql')).waiting ?? 0;
            if (waiting < 1) await new Promise((r) => setTimeout(r, 50));
          }
          expect(waiting).toBe(1); // in the database's lock wait, not polling
          await holder.release();
          const lock = await waiter;
          expect(lock.fence).toBeGreaterThan(holder.fence!);
          await lock.release();
        } finally {
          await t.close();
        }
      }
    } finally {
      await passed.destroy();
      await dropTable('mariadb', tableName);
    }
  }, 30_000);

  it('the migration refuses a name SQLite keeps for itself', async () => {
    const sqlite = tempSqliteFile();
    const ds = new DataSource({
      ...dataSourceOptions('sqlite', { sqliteFile: sqlite.file }),
      migrations: [createDistributedLockMigration('sqlite_locks')],
    } as never);
    await ds.initialize();
    try {
      const err = await ds.runMigrations().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockConfigError);
      expect((err as LockConfigError).field).toBe('tableName');
    } finally {
      await ds.destroy();
      sqlite.cleanup();
    }
  });
});
