/**
 * A small Nest HTTP app for the graceful-shutdown test, run as a real child process:
 * `node -r ./scripts/ts-register.cjs test/support/shutdown-app.ts`. Env: REDIS_URL, PREFIX,
 * SHUTDOWN_IN_FLIGHT ('finish' | 'abort'), SHUTDOWN_TIMEOUT_MS, TABLE (the SQL backend's fence
 * table, created), plus PG* for the database.
 * It holds a bare lock from startup, serves `GET /work/:key?ms=N` under `@Locked` (the handler
 * watches its lock's signal and re-enters its lock at the end), and on SIGTERM only calls
 * `app.close()`, as `enableShutdownHooks()` would, but without `process.exit()`: the process
 * then exits by itself only if every socket and timer the module owned was closed.
 * Prints `listening <url>`, `working <key>`, `SIGTERM`, `closed in <ms> ms`.
 */
import 'reflect-metadata';
import { Controller, Get, Inject, Module, Param, Query } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule, LockService, Locked } from '../../lib/index';
import { dataSourceOptions } from '../../servers/databases';

@Controller()
class WorkController {
  constructor(@Inject(LockService) private readonly locks: LockService) {}

  /** Works `ms` under the lock, or until the lock's signal aborts. */
  @Get('work/:key')
  @Locked('work:{0}')
  async work(@Param('key') key: string, @Query('ms') ms: string) {
    const lock = this.locks.current()!;
    console.log(`working ${key}`);
    const aborted = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), Number(ms));
      lock.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        { once: true },
      );
    });
    // Work that finishes during shutdown may still re-enter the lock it holds.
    const reentered = aborted
      ? false
      : await this.locks.withLock(`work:${key}`, (inner) => inner.fence === lock.fence);
    return { key, aborted, reentered, fence: lock.fence };
  }
}

const env = process.env;

@Module({
  imports: [
    LockModule.forRoot({
      backends: {
        main: { type: 'redis', url: env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
        db: {
          type: 'typeorm',
          dataSourceOptions: dataSourceOptions('postgres', { poolSize: 2 }),
          strategy: 'advisory',
          tableName: env.TABLE ?? 'shutdown_lock',
          createTable: true,
        },
      },
      defaultBackend: 'main',
      keyPrefix: env.PREFIX ?? 'shutdown:',
      shutdown: {
        inFlight: env.SHUTDOWN_IN_FLIGHT === 'abort' ? 'abort' : 'finish',
        timeout: Number(env.SHUTDOWN_TIMEOUT_MS ?? 10_000),
      },
    }),
  ],
  controllers: [WorkController],
})
class ShutdownAppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(ShutdownAppModule, { logger: ['error', 'warn', 'log'] });
  const locks = app.get(LockService);
  // Held from startup by no scope (like a leader lock): shutdown releases it at once.
  await locks.acquire('bare');
  await locks.acquire('bare-db', { backend: 'db' });
  await app.listen(0, '127.0.0.1');
  process.once('SIGTERM', () => {
    const started = performance.now();
    console.log('SIGTERM');
    void app.close().then(() => {
      console.log(`closed in ${Math.round(performance.now() - started)} ms`);
    });
  });
  console.log(`listening ${(await app.getUrl()).replace('[::1]', '127.0.0.1')}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
