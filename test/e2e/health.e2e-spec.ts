/**
 * The `@nestjs/terminus` health indicator over real stores: one entry per backend, `up` while
 * each store answers; a killed Redis and a frozen ZooKeeper (SIGSTOP: sockets open, no answer)
 * are reported `down` by name within the ping timeout, while the others stay `up`; and they
 * come back `up` once the stores do.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Inject } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { LockHealthIndicator, LockHealthModule } from '../../lib/terminus/index';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { dataSourceOptions, dropTable, uniqueTableName } from '../../servers/databases';
import { startRedisNode, stopAll, type RedisNode } from '../../servers/redis-servers';
import { startZkStandalone, stopAllZk, type ZkNode } from '../../servers/zk-servers';

const PING_TIMEOUT_MS = 500;

@Controller('health')
class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(LockHealthIndicator) private readonly locks: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy({ timeout: PING_TIMEOUT_MS })]);
  }
}

interface HealthBody {
  status: string;
  info: Record<string, { status: string; latencyMs: number }>;
  error: Record<string, { status: string; latencyMs: number; message: string }>;
  details: Record<string, { status: string }>;
}

describe('LockHealthIndicator (terminus) over real stores', () => {
  let redis: RedisNode;
  let zk: ZkNode;
  let t: LockTestApp;
  let url: string;
  const table = uniqueTableName('lock_health');

  const get = async (): Promise<{ status: number; body: HealthBody; ms: number }> => {
    const started = performance.now();
    const res = await fetch(url);
    return {
      status: res.status,
      body: (await res.json()) as HealthBody,
      ms: performance.now() - started,
    };
  };

  beforeAll(async () => {
    [redis, zk] = await Promise.all([startRedisNode(), startZkStandalone()]);
    t = await createLockApp(
      {
        backends: {
          cache: { type: 'redis', url: redis.url, restartGuard: false },
          zk: { type: 'zookeeper', connectionString: zk.connectString, sessionTimeout: 6_000 },
          db: {
            type: 'typeorm',
            dataSourceOptions: dataSourceOptions('postgres', { poolSize: 2 }),
            strategy: 'table',
            tableName: table,
            // A working backend: its table exists (a missing lock table is reported down).
            createTable: true,
          },
          local: { type: 'memory' },
        },
        defaultBackend: 'local',
      },
      { imports: [TerminusModule, LockHealthModule], controllers: [HealthController] },
    );
    await t.app.listen(0, '127.0.0.1');
    url = `${await t.app.getUrl()}/health`.replace('[::1]', '127.0.0.1');
  }, 60_000);

  afterAll(async () => {
    zk?.resume();
    await t?.close();
    await stopAll();
    await stopAllZk();
    await dropTable('postgres', table);
  }, 60_000);

  it('reports every backend up, one entry each, with its latency', async () => {
    const { status, body } = await get();
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(Object.keys(body.details).sort()).toEqual([
      'lock:cache',
      'lock:db',
      'lock:local',
      'lock:zk',
    ]);
    for (const entry of Object.values(body.info)) {
      expect(entry).toEqual({ status: 'up', latencyMs: expect.any(Number) });
      expect(entry.latencyMs).toBeLessThan(PING_TIMEOUT_MS);
    }
  });

  it('names the stores that are down, within the timeout, and the others stay up', async () => {
    await redis.stop('SIGKILL');
    await zk.pause();
    const { status, body, ms } = await get();
    expect(status).toBe(503);
    expect(body.status).toBe('error');
    expect(Object.keys(body.error).sort()).toEqual(['lock:cache', 'lock:zk']);
    expect(body.error['lock:zk']).toMatchObject({
      status: 'down',
      message: `no answer within ${PING_TIMEOUT_MS} ms`,
    });
    expect(body.error['lock:cache'].status).toBe('down');
    expect(body.error['lock:cache'].message.length).toBeGreaterThan(0);
    expect(Object.keys(body.info).sort()).toEqual(['lock:db', 'lock:local']);
    // The pings run in parallel, each bounded: one answer in about one timeout, not two.
    expect(ms).toBeLessThan(PING_TIMEOUT_MS + 1_000);
  });

  it('reports them up again once the stores are back', async () => {
    zk.resume();
    await redis.restart();
    const until = performance.now() + 20_000;
    let last = await get();
    while (last.status !== 200 && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      last = await get();
    }
    expect(last.status).toBe(200);
    expect(Object.keys(last.body.info).sort()).toEqual([
      'lock:cache',
      'lock:db',
      'lock:local',
      'lock:zk',
    ]);
  }, 30_000);
});
