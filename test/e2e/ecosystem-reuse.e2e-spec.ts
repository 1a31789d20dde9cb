import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { DynamicModule, INestApplicationContext } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { LockConfigError, LockModule, LockService } from '../../lib/index';
import { createDistributedLockMigration } from '../../lib/typeorm/index';
import { LOCK_ENGINE } from '../../lib/lock.constants';
import type { LockEngine } from '../../lib/core/engine/lock-engine';
import { redisLockNames } from '../support/redis-names';
import {
  dataSourceOptions,
  dropTable,
  TEST_DATABASE,
  uniqueTableName,
} from '../../servers/databases';

interface LockRow {
  key_text: string;
  owner: string | null;
  fence: string;
}

/** What happened when something destroyed the app's DataSource. */
interface DestroyCall {
  stack: string;
  /** The lock table at that moment (queried just before the real destroy). */
  rows: LockRow[];
  /** Whether the lock module's shutdown (LockEngine.close) had finished by then. */
  lockModuleClosed: boolean;
}

/**
 * Records every `destroy()` of the DataSource (who called it, and the lock table at that
 * moment), and when the lock module finished closing, so a test can tell who closed what, in
 * which order.
 */
function watchShutdown(
  app: INestApplicationContext,
  ds: DataSource,
  table: string,
): {
  destroys: DestroyCall[];
  /** `ds.isInitialized` right after the lock module closed its backends. */
  initializedAfterLockModule: () => boolean | undefined;
} {
  const destroys: DestroyCall[] = [];
  let lockModuleClosed = false;
  let initializedAfterLockModule: boolean | undefined;
  const destroy = ds.destroy.bind(ds);
  ds.destroy = async () => {
    const stack = new Error('destroy() called').stack ?? '';
    const rows = ds.isInitialized
      ? ((await ds.query(
          `SELECT key_text, owner, fence FROM "${table}" WHERE lock_key NOT LIKE '~%'`,
        )) as LockRow[])
      : [];
    destroys.push({ stack, rows, lockModuleClosed });
    return destroy();
  };
  const manager = app.get<LockEngine>(LOCK_ENGINE);
  const close = manager.close.bind(manager);
  manager.close = async () => {
    await close();
    lockModuleClosed = true;
    initializedAfterLockModule = ds.isInitialized;
  };
  return { destroys, initializedAfterLockModule: () => initializedAfterLockModule };
}

/**
 * The checks shared by both @nestjs/typeorm setups: the lock module locks through the app's
 * DataSource, and on `app.close()` it releases held locks while that DataSource is open and
 * leaves closing it to TypeOrmModule.
 */
async function provesReuse(
  app: INestApplicationContext,
  close: () => Promise<void>,
  table: string,
): Promise<void> {
  const ds = app.get(DataSource);
  const locks = app.get(LockService);
  expect(ds.isInitialized).toBe(true);

  const lock = await locks.acquire('order:1', { ttl: 30_000 });
  expect(typeof lock.fence).toBe('number');
  expect(lock.isHeld()).toBe(true);
  // A second acquirer (a bare call shares nothing with the first) is refused while it is held.
  expect(await locks.tryAcquire('order:1')).toBeNull();
  await expect(locks.acquire('order:1', { waitTimeout: 0 })).rejects.toMatchObject({
    code: 'LOCK_NOT_ACQUIRED',
  });
  expect(await locks.isLocked('order:1')).toBe(true);

  // The lock row is in the app's own database, read through the app's own DataSource.
  expect(await ds.query('SELECT current_database() AS db')).toEqual([{ db: TEST_DATABASE }]);
  // The key's own row (the reserved rows, fence buckets and their layout, start with '~').
  const rows = (await ds.query(
    `SELECT key_text, owner, fence FROM "${table}" WHERE lock_key NOT LIKE '~%'`,
  )) as LockRow[];
  expect(rows).toEqual([{ key_text: 'order:1', owner: lock.token, fence: String(lock.fence) }]);

  // Shut down with the lock still held (ttl 30 s: only an explicit release frees it in time).
  const watch = watchShutdown(app, ds, table);
  await close();

  // Exactly one destroy, by TypeOrmModule's own shutdown hook, never by the lock module
  // (TypeOrmModule skips destroy() on a DataSource that is no longer initialized, so a
  // destroy by the lock module would show up as the only call, from its code).
  expect(watch.destroys).toHaveLength(1);
  const [call] = watch.destroys;
  expect(call.stack).toMatch(/TypeOrmCoreModule\.onApplicationShutdown/);
  expect(call.stack).not.toMatch(/SqlSource|SqlLockBackend|LockEngine/);
  // The lock module had released the held lock while the DataSource was still open...
  // (a released key's row is deleted: only the reserved fence rows stay)...
  expect(call.rows).toEqual([]);
  // ...and its own shutdown left the DataSource open. Nest shuts the shallower LockModule down
  // before TypeOrmCoreModule (imported through TypeOrmModule), so the DataSource outlives the
  // lock module here and a destroy by it would show.
  expect(call.lockModuleClosed).toBe(true);
  expect(watch.initializedAfterLockModule()).toBe(true);
  expect(ds.isInitialized).toBe(false); // and TypeOrmModule then closed what it created
}

describe('reusing the DataSource of @nestjs/typeorm', () => {
  const tables: string[] = [];
  let app: INestApplicationContext | undefined;
  let closing: Promise<void> | undefined;
  /** Closes the app once (the test closes it; afterEach covers a test that failed before). */
  const close = (): Promise<void> => (closing ??= app?.close() ?? Promise.resolve());

  afterEach(async () => {
    await close();
    app = undefined;
    closing = undefined;
    for (const table of tables.splice(0)) await dropTable('postgres', table);
  });

  it('LockModule.forRoot with dataSourceToken, lock table from the app migrations', async () => {
    const table = uniqueTableName('eco_mig');
    const migrations = `${table}_migrations`;
    tables.push(table, migrations);
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptions('postgres', { poolSize: 4 }),
          // The app runs the shipped migration at startup, as a user would.
          migrations: [createDistributedLockMigration(table)],
          migrationsRun: true,
          migrationsTableName: migrations,
        } as TypeOrmModuleOptions),
        LockModule.forRoot({
          backends: {
            db: {
              type: 'typeorm',
              // The token of the default DataSource, as @nestjs/typeorm hands it out.
              dataSourceToken: getDataSourceToken(),
              strategy: 'table',
              tableName: table,
            },
          },
        }),
      ],
    }).compile();
    app = await moduleRef.init();

    const ds = app.get(DataSource);
    expect(getDataSourceToken()).toBe(DataSource);
    const ran = (await ds.query(`SELECT name FROM "${migrations}"`)) as Array<{ name: string }>;
    expect(ran.map((m) => m.name)).toEqual([`CreateDistributedLockTable_${table}_1763700000000`]);

    await provesReuse(app, close, table);
  });

  it('LockModule.forRootAsync injecting the DataSource, lock table created on first use', async () => {
    const table = uniqueTableName('eco_async');
    tables.push(table);
    let injected: DataSource | undefined;
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptions('postgres', { poolSize: 4 }),
        } as TypeOrmModuleOptions),
        LockModule.forRootAsync({
          // TypeOrmModule's core module is global, so the DataSource is injectable here.
          inject: [DataSource],
          useFactory: (ds: DataSource) => {
            injected = ds;
            return {
              backends: {
                db: {
                  type: 'typeorm',
                  dataSource: ds,
                  strategy: 'table',
                  tableName: table,
                  createTable: true,
                },
              },
            };
          },
        }),
      ],
    }).compile();
    app = await moduleRef.init();

    const ds = app.get(DataSource);
    expect(injected).toBe(ds);
    expect(await ds.query('SELECT to_regclass($1) AS t', [`"${table}"`])).toEqual([{ t: null }]);

    await provesReuse(app, close, table);
  });
});

describe('LockModule.forRootAsync from @nestjs/config', () => {
  // Database 3 of the machine Redis: a lock there proves the configured URL was used.
  const REDIS_URL = 'redis://127.0.0.1:6379/3';
  const PREFIX = `eco-cfg-${randomBytes(4).toString('hex')}:`;
  const TTL = 5_000;
  let redis: Redis;
  let redisDb0: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    redisDb0 = new Redis('redis://127.0.0.1:6379/0');
  });
  afterAll(async () => {
    const names = redisLockNames(PREFIX, 'cfg-key');
    await redis.del(names.lock);
    await Promise.all([redis.quit(), redisDb0.quit()]);
  });

  /** An app whose lock options come from ConfigService values loaded by ConfigModule. */
  function configuredApp(locks: Record<string, unknown>): Promise<INestApplicationContext> {
    const config: Promise<DynamicModule> = ConfigModule.forRoot({
      ignoreEnvFile: true,
      load: [() => ({ locks })],
    });
    return Test.createTestingModule({
      imports: [
        config,
        LockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (cfg: ConfigService) => ({
            backends: { main: { type: 'redis', url: cfg.getOrThrow<string>('locks.redisUrl') } },
            defaults: { ttl: cfg.get<number>('locks.ttl') },
            keyPrefix: cfg.get<string>('locks.keyPrefix'),
          }),
        }),
      ],
    })
      .compile()
      .then((moduleRef) => moduleRef.init());
  }

  it('uses the configured URL, ttl and key prefix', async () => {
    const app = await configuredApp({ redisUrl: REDIS_URL, ttl: TTL, keyPrefix: PREFIX });
    try {
      const lock = await app.get(LockService).acquire('cfg-key'); // no ttl: the configured default
      try {
        const names = redisLockNames(PREFIX, 'cfg-key');
        const pttl = await redis.pttl(names.lock);
        expect(pttl).toBeLessThanOrEqual(TTL);
        expect(pttl).toBeGreaterThan(TTL - 1_000);
        // The holder's fence is kept with the lock: "<token> <fence>".
        expect((await redis.get(names.lock))?.split(' ')[1]).toBe(String(lock.fence));
        expect(await redisDb0.exists(names.lock)).toBe(0); // database 3, as the URL says
      } finally {
        await lock.release();
      }
    } finally {
      await app.close();
    }
  });

  it.each([
    [{ redisUrl: REDIS_URL, ttl: -1 }, 'defaults.ttl'],
    [{ redisUrl: 'http://127.0.0.1:6379', ttl: TTL }, 'backends.main.url'],
  ])('fails bootstrap with LockConfigError on a bad config value (%j)', async (locks, field) => {
    const err = await configuredApp(locks).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LockConfigError);
    expect((err as LockConfigError).field).toBe(field);
    expect((err as LockConfigError).message).toContain(field);
  });
});
