// Run only in cells that install `typeorm` and `pg` (the TypeORM line that NestJS major's
// @nestjs/typeorm uses): for each strategy, two independent app contexts (as two services would
// be) on one PostgreSQL database. With SQLITE_DRIVER (the package name of a better-sqlite3 the
// cell installed), also the table strategy on an SQLite file, that driver handed to TypeORM.
// Prints one JSON line: per check, whether the second was refused while the first held the key,
// and the fences of the two grants.
import 'reflect-metadata';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule, LockService } from 'nestjs-distributed-lock';

const STRATEGIES = ['table', 'for-update', 'advisory'] as const;
type Strategy = (typeof STRATEGIES)[number];

const env = process.env;

const postgres = {
  type: 'postgres',
  host: env.PGHOST || '127.0.0.1',
  port: Number(env.PGPORT || 5432),
  username: env.PGUSER || 'postgres',
  password: env.PGPASSWORD,
  database: env.PGDATABASE || 'locktest',
};

async function service(strategy: Strategy, dataSourceOptions: Record<string, unknown>) {
  @Module({
    imports: [
      LockModule.forRoot({
        backends: {
          db: {
            type: 'typeorm',
            strategy,
            tableName: env.SQL_TABLE ?? 'compat_lock',
            createTable: true,
            dataSourceOptions,
          },
        },
        keyPrefix: env.LOCK_PREFIX ?? '',
      }),
    ],
  })
  class SqlModule {}
  const app = await NestFactory.createApplicationContext(SqlModule, { logger: ['error', 'warn'] });
  return { app, locks: app.get(LockService) };
}

async function check(name: string, strategy: Strategy, options: Record<string, unknown>) {
  const a = await service(strategy, options);
  const b = await service(strategy, options);
  try {
    const key = `sql:${name}`;
    let refusedWhileHeld = false;
    const first = await a.locks.withLock(key, async (lock) => {
      refusedWhileHeld = (await b.locks.tryAcquire(key)) === null;
      return lock.fence;
    });
    const second = await b.locks.withLock(key, (lock) => lock.fence);
    return { strategy: name, refusedWhileHeld, fences: [first, second] };
  } finally {
    await a.app.close();
    await b.app.close();
  }
}

async function main(): Promise<void> {
  const results = [];
  for (const strategy of STRATEGIES) results.push(await check(strategy, strategy, postgres));
  if (env.SQLITE_DRIVER) {
    // As a user on Node 24 would: better-sqlite3 13 under its own name, handed to TypeORM.
    const driver: unknown = createRequire(join(process.cwd(), 'package.json'))(env.SQLITE_DRIVER);
    const database = join(env.WITNESS_DIR ?? process.cwd(), 'locks.sqlite');
    results.push(
      await check('sqlite table', 'table', { type: 'better-sqlite3', database, driver }),
    );
  }
  console.log(JSON.stringify(results));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
