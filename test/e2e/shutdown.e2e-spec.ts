/**
 * Graceful shutdown with real processes (test/support/shutdown-app.ts): SIGTERM while a bare
 * lock is held and a request is working under `@Locked`. Per `shutdown.inFlight`, the request
 * finishes (re-entering its lock on the way) or is aborted through its lock's signal; every held
 * lock is released (gone from Redis and Postgres well before any ttl could expire it); and the
 * process exits by itself, with code 0, within a bound: it calls no `process.exit()`, so it can
 * only exit once every client the module created (Redis, its subscriber, the Postgres pool) is
 * closed and no timer is left.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { redisLockNames } from '../support/redis-names';
import { advisoryKey64 } from '../../lib/backends/sql/advisory.strategy';
import { dataSourceOptions, dropTable, uniqueTableName } from '../../servers/databases';

const REDIS_URL = 'redis://127.0.0.1:6379';
/** Exit bound after the work is done (or aborted): release, close clients, drain the loop. */
const EXIT_BOUND_MS = 3_000;

interface AppRun {
  readonly prefix: string;
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  output(): string;
  /** Resolves once the output contains `text`; rejects after `timeoutMs` (default 30 s). */
  waitFor(text: string, timeoutMs?: number): Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: string | null; at: number }>;
}

const running = new Set<ChildProcessWithoutNullStreams>();
const tables: string[] = [];

async function startApp(env: Record<string, string>): Promise<AppRun> {
  const prefix = `shutdown-${randomUUID().slice(0, 8)}:`;
  const table = uniqueTableName('lock_sd');
  tables.push(table);
  const root = process.cwd();
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.cjs'), join(root, 'test/support/shutdown-app.ts')],
    {
      cwd: root,
      env: { ...process.env, ...env, PREFIX: prefix, REDIS_URL, TABLE: table },
      stdio: 'pipe',
    },
  );
  running.add(child);
  let out = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  const onData = (chunk: Buffer): void => {
    out += chunk.toString();
    for (const w of [...waiters]) {
      if (out.includes(w.text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((r) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      r({ code, signal, at: performance.now() });
    }),
  );
  const waitFor = (text: string, timeoutMs = 30_000): Promise<void> => {
    if (out.includes(text)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "${text}" within ${timeoutMs} ms; output:\n${out}`)),
        timeoutMs,
      );
      waiters.push({
        text,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  };
  await Promise.race([
    waitFor('listening '),
    exited.then(() => Promise.reject(new Error(`app exited at startup:\n${out}`))),
  ]);
  const url = /listening (http:\/\/\S+)/.exec(out)![1];
  return { prefix, child, url, output: () => out, waitFor, exited };
}

describe('graceful shutdown on SIGTERM (real processes)', () => {
  let redis: Redis;
  let db: DataSource;
  const apps: Record<'finish' | 'abort' | 'finishTimeout', AppRun | undefined> = {
    finish: undefined,
    abort: undefined,
    finishTimeout: undefined,
  };

  /** Whether the app's Redis lock `key` (unprefixed) exists now. */
  const redisHeld = async (app: AppRun, key: string): Promise<boolean> =>
    (await redis.exists(redisLockNames(app.prefix, key).lock)) === 1;
  /** Whether anyone holds the app's advisory lock `key` on Postgres now. */
  const pgHeld = async (app: AppRun, key: string): Promise<boolean> => {
    // A bigint advisory key shows in pg_locks as its high and low 32 bits (objsubid 1).
    const k = BigInt.asUintN(64, BigInt(advisoryKey64(`${app.prefix}${key}`)));
    const rows = (await db.query(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
      [(k >> 32n).toString(), (k & 0xffffffffn).toString()],
    )) as { n: number }[];
    return rows[0].n > 0;
  };

  /** Starts `GET /work/k?ms=`, waits until it works under its lock, then sends SIGTERM. */
  const termDuringWork = async (app: AppRun, workMs: number) => {
    const response = fetch(`${app.url}/work/k?ms=${workMs}`).then(async (res) => ({
      status: res.status,
      body: (await res.json()) as { aborted: boolean; reentered: boolean; fence: number },
      at: performance.now(),
    }));
    await app.waitFor('working k');
    expect(await redisHeld(app, 'work:k')).toBe(true);
    expect(await redisHeld(app, 'bare')).toBe(true);
    expect(await pgHeld(app, 'bare-db')).toBe(true);
    const termAt = performance.now();
    app.child.kill('SIGTERM');
    // When the bare Redis lock (held by no running work) disappears, polled until the response.
    let bareFreedAt: number | undefined;
    let answered = false;
    void response.then(() => (answered = true));
    while (!answered && bareFreedAt === undefined) {
      if (!(await redisHeld(app, 'bare'))) bareFreedAt = performance.now();
      else await new Promise((r) => setTimeout(r, 20));
    }
    return { response: await response, exit: await app.exited, termAt, bareFreedAt };
  };

  const expectAllReleased = async (app: AppRun) => {
    expect(await redisHeld(app, 'work:k')).toBe(false);
    expect(await redisHeld(app, 'bare')).toBe(false);
    expect(await pgHeld(app, 'bare-db')).toBe(false);
    expect(app.output()).toMatch(/closed in \d+ ms/);
  };

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    db = new DataSource(dataSourceOptions('postgres', { poolSize: 1 }) as never);
    await db.initialize();
    // Booting a Nest app takes seconds on this machine: boot all three at once.
    [apps.finish, apps.abort, apps.finishTimeout] = await Promise.all([
      startApp({ SHUTDOWN_IN_FLIGHT: 'finish' }),
      startApp({ SHUTDOWN_IN_FLIGHT: 'abort' }),
      startApp({ SHUTDOWN_IN_FLIGHT: 'finish', SHUTDOWN_TIMEOUT_MS: '700' }),
    ]);
  }, 60_000);

  afterAll(async () => {
    for (const child of running) child.kill('SIGKILL');
    redis?.disconnect();
    await db?.destroy();
    for (const table of tables) await dropTable('postgres', table);
  });

  it("inFlight 'finish': the request completes (re-entering its lock), then locks are released and the process exits by itself", async () => {
    const app = apps.finish!;
    const workMs = 1_500;
    const { response, exit, termAt, bareFreedAt } = await termDuringWork(app, workMs);
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ aborted: false, reentered: true });
    expect(typeof response.body.fence).toBe('number');
    // The bare lock was released at once, while the request was still working.
    expect(bareFreedAt).toBeDefined();
    expect(bareFreedAt! - termAt).toBeLessThan(workMs / 2);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.at).toBeGreaterThan(response.at - 50);
    expect(exit.at - termAt).toBeLessThan(workMs + EXIT_BOUND_MS);
    await expectAllReleased(app);
  }, 30_000);

  it("inFlight 'abort': the request's lock signal aborts at once, locks are released, the process exits", async () => {
    const app = apps.abort!;
    const { response, exit, termAt } = await termDuringWork(app, 20_000);
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ aborted: true, reentered: false });
    expect(response.at - termAt).toBeLessThan(1_000);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.at - termAt).toBeLessThan(EXIT_BOUND_MS);
    await expectAllReleased(app);
  }, 30_000);

  it("inFlight 'finish' with timeout 700 ms: work still running then is aborted, and the process exits", async () => {
    const app = apps.finishTimeout!;
    const { response, exit, termAt } = await termDuringWork(app, 20_000);
    expect(response.body).toMatchObject({ aborted: true });
    expect(response.at - termAt).toBeGreaterThanOrEqual(650);
    expect(response.at - termAt).toBeLessThan(700 + 1_000);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.at - termAt).toBeLessThan(700 + EXIT_BOUND_MS);
    await expectAllReleased(app);
  }, 30_000);
});
