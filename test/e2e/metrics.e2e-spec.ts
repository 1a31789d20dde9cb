/**
 * Lock metrics through OpenTelemetry, scraped the way Prometheus does: an SDK meter provider
 * with the Prometheus exporter, registered before the app, and real Redis activity (grants,
 * a busy refusal, renewals, a lock lost because its key vanished). Series carry the backend as
 * their only label, never the key; leadership series carry the leadership's name. Without an
 * SDK, and with `metrics: false`, nothing breaks.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { metrics } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { Redis } from 'ioredis';
import { LOCK_METER_NAME, OtelLockMetrics } from '../../lib/core/engine/otel-metrics';
import { LeaderService } from '../../lib/leader/leader.service';
import { redisLockNames } from '../support/redis-names';
import { createLockApp, type LockTestApp } from '../support/lock-app';

const REDIS_URL = 'redis://127.0.0.1:6379';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Value of the Prometheus sample `name{...} value` whose labels are exactly `labels` plus the
 * exporter's own `otel_scope_name`, or undefined.
 */
function sample(text: string, name: string, labels: string): number | undefined {
  const want = `${name}{${labels},otel_scope_name="${LOCK_METER_NAME}"}`;
  const line = text.split('\n').find((l) => l.startsWith(`${want} `));
  return line === undefined ? undefined : Number(line.slice(want.length + 1));
}

describe('OpenTelemetry lock metrics, scraped as Prometheus text', () => {
  const prefix = `metrics-${randomUUID().slice(0, 8)}:`;
  let exporter: PrometheusExporter;
  let provider: MeterProvider;
  let server: Server;
  let scrapeUrl: string;
  let t: LockTestApp;
  let redis: Redis;

  beforeAll(async () => {
    exporter = new PrometheusExporter({ preventServerStart: true });
    provider = new MeterProvider({ readers: [exporter] });
    // As in an app's instrumentation file: the provider is registered before the app exists.
    expect(metrics.setGlobalMeterProvider(provider)).toBe(true);
    server = createServer((req, res) => exporter.getMetricsRequestHandler(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    scrapeUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/metrics`;
    redis = new Redis(REDIS_URL);
    t = await createLockApp({
      backends: { main: { type: 'redis', url: REDIS_URL }, local: { type: 'memory' } },
      defaultBackend: 'main',
      keyPrefix: prefix,
    });
  });

  afterAll(async () => {
    await t?.close();
    redis?.disconnect();
    await new Promise((r) => server?.close(r));
    await provider?.shutdown();
    metrics.disable();
  });

  it('exports attempts, grants, refusals, waits, holds, renewals and losses per backend', async () => {
    const { locks } = t;
    // Two grants and one busy refusal on main, one grant on local.
    const first = await locks.acquire('a');
    expect(await locks.tryAcquire('a')).toBeNull();
    await sleep(20);
    await first.release();
    await locks.withLock('b', () => sleep(5));
    await locks.withLock('c', () => undefined, { backend: 'local' });
    // A lock renewed a few times, then lost: its key vanishes, the next renewal is refused.
    const doomed = await locks.acquire('doomed', { ttl: 300 });
    await sleep(350);
    await redis.del(redisLockNames(prefix, 'doomed').lock);
    const lost = new Promise<void>((resolve) =>
      doomed.signal.addEventListener('abort', () => resolve()),
    );
    await lost;

    const text = await (await fetch(scrapeUrl)).text();
    const main = 'lock_backend="main"';
    const local = 'lock_backend="local"';
    expect(sample(text, 'lock_acquire_attempts_total', main)).toBe(4);
    expect(sample(text, 'lock_acquired_total', main)).toBe(3);
    expect(sample(text, 'lock_not_acquired_total', main)).toBe(1);
    expect(sample(text, 'lock_lost_total', main)).toBe(1);
    expect(sample(text, 'lock_renewals_total', main)).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'lock_held', main)).toBe(0);
    expect(sample(text, 'lock_acquire_attempts_total', local)).toBe(1);
    expect(sample(text, 'lock_acquired_total', local)).toBe(1);
    // Histograms in seconds: waits split by outcome, holds (released and lost) per backend.
    expect(sample(text, 'lock_wait_duration_count', `${main},lock_outcome="acquired"`)).toBe(3);
    expect(sample(text, 'lock_wait_duration_count', `${main},lock_outcome="not_acquired"`)).toBe(1);
    expect(sample(text, 'lock_hold_duration_count', main)).toBe(3);
    const holdSum = sample(text, 'lock_hold_duration_sum', main)!;
    expect(holdSum).toBeGreaterThan(0.35); // the doomed lock alone was held > 350 ms
    expect(holdSum).toBeLessThan(5);
    expect(text).toMatch(/# TYPE lock_wait_duration histogram/);
    expect(text).toMatch(/# UNIT lock_wait_duration s\n/);
    // Never a key in a label: keys are unbounded.
    const lockLines = text.split('\n').filter((l) => l.startsWith('lock_'));
    expect(lockLines.length).toBeGreaterThan(10);
    for (const line of lockLines) {
      expect(line).not.toContain(prefix);
      expect(line).not.toMatch(/\bkey=/);
      expect(line).not.toContain('doomed');
    }
  });

  it('exports leadership transitions and whether this instance leads, per name', async () => {
    const leaders = t.app.get(LeaderService);
    const series = async () => {
      const text = await (await fetch(scrapeUrl)).text();
      const labels = 'leadership_name="billing"';
      return {
        transitions: sample(text, 'leadership_transitions_total', labels),
        leading: sample(text, 'leadership_leading', labels),
      };
    };
    const leadership = await leaders.campaign('billing', { backend: 'local' });
    expect(await series()).toEqual({ transitions: 1, leading: 1 });
    await leadership.resign();
    expect(await series()).toEqual({ transitions: 2, leading: 0 });
  });
});

describe('without an OpenTelemetry SDK', () => {
  it('the API alone is a no-op: locks work, nothing is exported, nothing throws', async () => {
    metrics.disable();
    const t = await createLockApp({ backends: { local: { type: 'memory' } } });
    try {
      await t.locks.withLock('k', () => undefined);
      expect(t.manager.settings.otel).toBeInstanceOf(OtelLockMetrics);
      expect(t.locks.getMetrics().local.lock_acquired_total).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('metrics: false records nothing through OpenTelemetry', async () => {
    const t = await createLockApp({ backends: { local: { type: 'memory' } }, metrics: false });
    try {
      expect(t.manager.settings.otel).toBeUndefined();
      await t.locks.withLock('k', () => undefined);
    } finally {
      await t.close();
    }
  });

  it('without @opentelemetry/api installed, metrics are simply off', async () => {
    const missing = Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
      code: 'MODULE_NOT_FOUND',
    });
    await expect(OtelLockMetrics.load(() => Promise.reject(missing))).resolves.toBeUndefined();
    // Any other failure is not swallowed.
    await expect(OtelLockMetrics.load(() => Promise.reject(new Error('boom')))).rejects.toThrow(
      'boom',
    );
  });
});
