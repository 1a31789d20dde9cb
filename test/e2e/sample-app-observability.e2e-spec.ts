/**
 * The sample app's observability endpoints, on a real app process with its embedded default
 * (SQLite store and locks): `GET /health` (terminus, one entry per lock backend) and
 * `GET /metrics` (Prometheus text from the OpenTelemetry SDK), counting the orders' locks.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CLEAN_APP_ENV,
  startApp,
  stopAllApps,
  type AppProcess,
} from '../../sample-app/demo/app-process';

describe('sample app: /health and /metrics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'inventory-obs-'));
  let app: AppProcess;

  beforeAll(async () => {
    app = await startApp('obs', {
      ...CLEAN_APP_ENV,
      SQLITE_FILE: join(dir, 'inventory.sqlite'),
    });
  }, 60_000);

  afterAll(async () => {
    await stopAllApps();
    rmSync(dir, { recursive: true, force: true });
  });

  it('GET /health reports the lock backend up', async () => {
    const res = await fetch(`${app.url}/health`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; details: Record<string, unknown> };
    expect(body.status).toBe('ok');
    expect(body.details).toEqual({
      'lock:sqlite': { status: 'up', latencyMs: expect.any(Number) },
    });
  });

  it('GET /metrics exposes the lock metrics, labelled by backend, counting each order', async () => {
    const json = { 'content-type': 'application/json' };
    const put = await fetch(`${app.url}/inventory/obs-sku`, {
      method: 'PUT',
      headers: json,
      body: JSON.stringify({ stock: 5 }),
    });
    expect(put.status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const order = await fetch(`${app.url}/inventory/obs-sku/deduct`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ qty: 1 }),
      });
      expect(order.status).toBe(201);
    }
    const res = await fetch(`${app.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    const value = (name: string): number => {
      const line = text
        .split('\n')
        .find((l) => l.startsWith(`${name}{lock_backend="sqlite",`) && !l.includes('lock_outcome'));
      if (!line) throw new Error(`no ${name} for backend sqlite in:\n${text}`);
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    expect(value('lock_acquired_total')).toBeGreaterThanOrEqual(3);
    expect(value('lock_acquire_attempts_total')).toBeGreaterThanOrEqual(3);
    expect(value('lock_hold_duration_count')).toBeGreaterThanOrEqual(3);
    expect(value('lock_held')).toBe(0);
    expect(text).toContain('# TYPE lock_wait_duration histogram');
    expect(text).not.toContain('obs-sku');
  });
});
