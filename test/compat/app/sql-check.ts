// Run only in cells that install `typeorm` and `pg` (the TypeORM line that NestJS major's
// @nestjs/typeorm uses): for each strategy, two independent app contexts (as two services would
// be) on one PostgreSQL database. Prints one JSON line: per strategy, whether the second was
// refused while the first held the key, and the fences of the two grants.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule, LockService } from 'nestjs-distributed-lock';

const STRATEGIES = ['table', 'for-update', 'advisory'] as const;
type Strategy = (typeof STRATEGIES)[number];

const env = process.env;

async function service(strategy: Strategy) {
  @Module({
    imports: [
      LockModule.forRoot({
        backends: {
          db: {
            type: 'typeorm',
            strategy,
            tableName: env.SQL_TABLE ?? 'compat_lock',
            createTable: true,
            dataSourceOptions: {
              type: 'postgres',
              host: env.PGHOST || '127.0.0.1',
              port: Number(env.PGPORT || 5432),
              username: env.PGUSER || 'postgres',
              password: env.PGPASSWORD,
              database: env.PGDATABASE || 'locktest',
            },
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

async function check(strategy: Strategy) {
  const a = await service(strategy);
  const b = await service(strategy);
  try {
    const key = `sql:${strategy}`;
    let refusedWhileHeld = false;
    const first = await a.locks.withLock(key, async (lock) => {
      refusedWhileHeld = (await b.locks.tryAcquire(key)) === null;
      return lock.fence;
    });
    const second = await b.locks.withLock(key, (lock) => lock.fence);
    return { strategy, refusedWhileHeld, fences: [first, second] };
  } finally {
    await a.app.close();
    await b.app.close();
  }
}

async function main(): Promise<void> {
  const results = [];
  for (const strategy of STRATEGIES) results.push(await check(strategy));
  console.log(JSON.stringify(results));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
