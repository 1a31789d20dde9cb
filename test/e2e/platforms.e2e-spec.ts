import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Param } from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { Locked, LockModule, LockService, type LockModuleOptions } from '../../lib/index';
import { redisLockNames } from '../support/redis-names';
import { DEFAULT_FENCE_BUCKETS, fenceBucket } from '../../lib/backends/redis/fence-buckets';
import { RedisKeyspace } from '../../lib/backends/redis/redis-keys';

// The machine Redis (scripts/ensure-services.sh); a fresh prefix per run keeps runs apart.
const REDIS_URL = 'redis://127.0.0.1:6379';
const PREFIX = `platforms-${randomBytes(4).toString('hex')}:`;
const HOLD_MS = 25;
const CONCURRENT = 6;
const MEET_TIMEOUT_MS = 2_000;
/** A port nothing listens on (the discard port; refused on loopback). */
const DOWN_PORT = 9;

const tick = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

@Controller('orders')
class OrdersController {
  /** Handlers running right now, per order id, and the most ever seen at once. */
  readonly active = new Map<string, number>();
  readonly maxActive = new Map<string, number>();
  /** Handlers inside the `meet` route right now, whatever their key. */
  meeting = 0;
  /** Ids whose `hold` handler is running, and how to let it finish. */
  readonly holding = new Map<string, () => void>();
  tried = 0;

  constructor(private readonly locks: LockService) {}

  /** Read-yield-write style section: overlaps would show in `maxActive`. */
  @Get(':id/pay')
  @Locked('order:{0}')
  async pay(@Param('id') id: string): Promise<{ id: string; fence: number | null }> {
    const now = (this.active.get(id) ?? 0) + 1;
    this.active.set(id, now);
    this.maxActive.set(id, Math.max(this.maxActive.get(id) ?? 0, now));
    await tick(HOLD_MS);
    this.active.set(id, (this.active.get(id) ?? 1) - 1);
    return { id, fence: this.locks.current()?.fence ?? null };
  }

  /** Waits inside its lock until a second handler is inside too: only possible if both run at once. */
  @Get(':id/meet')
  @Locked('order:{0}')
  async meet(@Param('id') _id: string): Promise<{ met: boolean }> {
    this.meeting++;
    const deadline = Date.now() + MEET_TIMEOUT_MS;
    while (this.meeting < 2 && Date.now() < deadline) await tick(5);
    const met = this.meeting >= 2;
    // Stay a moment so the other handler sees us too before we leave.
    await tick(50);
    this.meeting--;
    return { met };
  }

  /** Holds its lock until the test lets it go. */
  @Get(':id/hold')
  @Locked('order:{0}')
  async hold(@Param('id') id: string): Promise<{ id: string }> {
    await new Promise<void>((resolve) => this.holding.set(id, resolve));
    this.holding.delete(id);
    return { id };
  }

  @Get(':id/try')
  @Locked('order:{0}', { waitTimeout: 0 })
  async tryIt(@Param('id') id: string): Promise<{ id: string }> {
    this.tried++;
    return { id };
  }

  /** Locks on a backend whose Redis does not run. */
  @Get(':id/down')
  @Locked('order:{0}', { backend: 'down' })
  async down(@Param('id') id: string): Promise<{ id: string }> {
    this.tried++;
    return { id };
  }

  /** What `LockService.current()` shows inside the request. */
  @Get(':id/current')
  @Locked('order:{0}')
  async current(@Param('id') _id: string): Promise<{
    key?: string;
    backend?: string;
    fence?: number | null;
    held?: boolean;
  }> {
    const lock = this.locks.current();
    return { key: lock?.key, backend: lock?.backend, fence: lock?.fence, held: lock?.isHeld() };
  }
}

/** Boots a real HTTP app on the given platform and listens on an ephemeral port. */
async function startApp(
  makeAdapter: () => AbstractHttpAdapter,
  options: Partial<LockModuleOptions> = {},
): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      LockModule.forRoot({
        backends: {
          main: { type: 'redis', url: REDIS_URL },
          // Nothing listens there; without an offline queue every command fails at once.
          down: {
            type: 'redis',
            url: `redis://127.0.0.1:${DOWN_PORT}`,
            redisOptions: { enableOfflineQueue: false, retryStrategy: () => null },
          },
        },
        defaultBackend: 'main',
        keyPrefix: PREFIX,
        defaults: { ttl: 5_000, waitTimeout: 5_000 },
        ...options,
      }),
    ],
    controllers: [OrdersController],
  }).compile();
  const app = moduleRef.createNestApplication(makeAdapter(), { logger: false });
  try {
    await app.listen(0, '127.0.0.1');
    return { app, url: `${await app.getUrl()}/orders` };
  } catch (err) {
    await app.close();
    throw err;
  }
}

/** Waits (bounded) until the `hold` handler for `id` is inside its lock. */
async function untilHolding(ctrl: OrdersController, id: string): Promise<() => void> {
  const deadline = Date.now() + 5_000;
  while (!ctrl.holding.has(id)) {
    if (Date.now() > deadline) throw new Error(`hold/${id} never started`);
    await tick(5);
  }
  return ctrl.holding.get(id)!;
}

/** A busy lock answers `status` with the interceptor's JSON, and the handler never runs. */
async function expectBusyAnswer(
  ctrl: OrdersController,
  url: string,
  id: string,
  status: number,
  retryAfter = '1',
): Promise<void> {
  const holding = fetch(`${url}/${id}/hold`);
  const release = await untilHolding(ctrl, id);
  const triedBefore = ctrl.tried;
  try {
    const busy = await fetch(`${url}/${id}/try`);
    expect(busy.status).toBe(status);
    expect(busy.headers.get('retry-after')).toBe(retryAfter);
    expect(await busy.json()).toEqual({
      statusCode: status,
      code: 'LOCK_NOT_ACQUIRED',
      message: 'The resource is locked by another operation; retry later.',
    });
    expect(ctrl.tried).toBe(triedBefore); // fail closed: the handler did not run unlocked

    const other = await fetch(`${url}/${id}-other/try`);
    expect(other.status).toBe(200);
    expect(await other.json()).toEqual({ id: `${id}-other` });
  } finally {
    release();
  }
  const held = await holding;
  expect(held.status).toBe(200);
  expect(await held.json()).toEqual({ id });
  const after = await fetch(`${url}/${id}/try`);
  expect(after.status).toBe(200);
}

let redis: Redis;

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  // Remove this run's keys (locks are released; fence counters stay otherwise).
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `*${PREFIX}*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await redis.quit();
});

describe.each<[string, () => AbstractHttpAdapter]>([
  ['express', () => new ExpressAdapter()],
  ['fastify', () => new FastifyAdapter()],
])('@Locked route handlers on %s, over real HTTP with Redis', (platform, makeAdapter) => {
  describe('default options', () => {
    let app: INestApplication;
    let url: string;
    let ctrl: OrdersController;

    beforeAll(async () => {
      ({ app, url } = await startApp(makeAdapter));
      ctrl = app.get(OrdersController);
    });
    afterAll(() => app?.close());

    it('serializes concurrent requests on one key; every one succeeds with its own fence', async () => {
      const id = `${platform}-serial`;
      const responses = await Promise.all(
        Array.from({ length: CONCURRENT }, () => fetch(`${url}/${id}/pay`)),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(CONCURRENT).fill(200));
      const bodies = (await Promise.all(responses.map((r) => r.json()))) as Array<{
        id: string;
        fence: number | null;
      }>;
      expect(ctrl.maxActive.get(id)).toBe(1);
      const fences = bodies.map((b) => b.fence);
      for (const fence of fences) expect(typeof fence).toBe('number');
      expect(new Set(fences).size).toBe(CONCURRENT);
    });

    it('lets requests on different keys hold their locks at the same time', async () => {
      const [a, b] = await Promise.all([
        fetch(`${url}/${platform}-meet-a/meet`),
        fetch(`${url}/${platform}-meet-b/meet`),
      ]);
      expect([a.status, b.status]).toEqual([200, 200]);
      expect([await a.json(), await b.json()]).toEqual([{ met: true }, { met: true }]);
    });

    it('answers 409 with code LOCK_NOT_ACQUIRED (never 500) when waitTimeout is 0 and the key is held', async () => {
      await expectBusyAnswer(ctrl, url, `${platform}-busy`, 409);
    });

    it('shows the held lock through LockService.current() inside the handler', async () => {
      const id = `${platform}-current`;
      const res = await fetch(`${url}/${id}/current`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { key: string; fence: number; held: boolean };
      expect(body).toEqual({
        key: `order:${id}`,
        backend: 'main',
        fence: expect.any(Number),
        held: true,
      });
      // The fence was drawn from the prefixed key's fence bucket (shared with other keys, so
      // at least this fence by now), and the lock is gone now.
      const names = redisLockNames(PREFIX, `order:${id}`);
      const keyspace = new RedisKeyspace(PREFIX);
      const counter = keyspace.counter(fenceBucket(names.slot, DEFAULT_FENCE_BUCKETS));
      expect(Number(await redis.get(counter))).toBeGreaterThanOrEqual(body.fence);
      expect(await redis.exists(names.lock)).toBe(0);
    });
  });

  describe('a store that is down, and an app that is shutting down', () => {
    it('answers 503 with LOCK_BACKEND and Retry-After 5 when the store fails (never 500)', async () => {
      const { app, url } = await startApp(makeAdapter);
      try {
        const ctrl = app.get(OrdersController);
        const res = await fetch(`${url}/${platform}-down/down`);
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('5');
        expect(await res.json()).toEqual({
          statusCode: 503,
          code: 'LOCK_BACKEND',
          message: 'The lock service is unavailable; retry later.',
        });
        expect(ctrl.tried).toBe(0); // fail closed
      } finally {
        await app.close();
      }
    });

    it('answers 503 with LOCK_SHUTTING_DOWN to a request arriving while the app drains', async () => {
      const { app, url } = await startApp(makeAdapter);
      const ctrl = app.get(OrdersController);
      const id = `${platform}-drain`;
      const holding = fetch(`${url}/${id}/hold`);
      const release = await untilHolding(ctrl, id);
      // Shutdown waits for the running @Locked work (inFlight 'finish') with the server still up.
      const closing = app.close();
      try {
        let res: Response | undefined;
        for (let i = 0; i < 100; i++) {
          res = await fetch(`${url}/${id}-new/try`);
          if (res.status !== 200) break;
          await res.arrayBuffer();
          await tick(10);
        }
        expect(res?.status).toBe(503);
        expect(res?.headers.get('retry-after')).toBe('5');
        expect(await res?.json()).toEqual({
          statusCode: 503,
          code: 'LOCK_SHUTTING_DOWN',
          message: 'The lock service is unavailable; retry later.',
        });
      } finally {
        release();
        await holding.catch(() => undefined);
        await closing;
      }
    });
  });

  describe('notAcquiredHttpStatus: 423, unavailableHttpStatus and retryAfterSeconds', () => {
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      ({ app, url } = await startApp(makeAdapter, {
        notAcquiredHttpStatus: 423,
        unavailableHttpStatus: 502,
        retryAfterSeconds: { notAcquired: 3, unavailable: false },
      }));
    });
    afterAll(() => app?.close());

    it('answers 423 instead of 409 for a busy lock, with the configured Retry-After', async () => {
      await expectBusyAnswer(app.get(OrdersController), url, `${platform}-locked`, 423, '3');
    });

    it('answers the configured status for a failed store, without Retry-After when false', async () => {
      const res = await fetch(`${url}/${platform}-down2/down`);
      expect(res.status).toBe(502);
      expect(res.headers.get('retry-after')).toBeNull();
      expect(await res.json()).toMatchObject({ code: 'LOCK_BACKEND' });
    });
  });
});
