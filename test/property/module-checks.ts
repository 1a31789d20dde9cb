/**
 * The property for `LockModule.forRoot` options, one configuration at a time: it boots, and
 * then every configured backend takes and frees a lock under its name with the key prefix and
 * default ttl applied, a call without `backend` goes to the default one, and metrics and health
 * list exactly the configured names; or the boot is refused with a `LockConfigError` naming one
 * of the fields at fault, before any backend was created.
 */
import { expect } from '@jest/globals';
import { memoryBackendFactory } from '../../lib/backends/memory/memory.factory';
import { LockConfigError } from '../../lib/errors/lock.errors';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { settle, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import type { Outcome } from './call-checks';
import type { ModuleCase } from './module-inputs';

/** Longest a boot or a close may take. */
const BOOT_MS = 10_000;

/** Boots `c.options` and checks the outcome; `Outcome` says which way it went. */
export async function checkModuleCase(c: ModuleCase): Promise<Outcome> {
  const created = countCreates();
  let outcome;
  try {
    outcome = await settle(
      within(
        (async () => createLockApp(c.options.build() as LockModuleOptions))(),
        BOOT_MS,
        'LockModule.forRoot',
      ),
    );
  } finally {
    created.restore();
  }
  if (c.options.invalid.length > 0) {
    if (outcome.ok) await outcome.value.close();
    if (outcome.ok || !(outcome.error instanceof LockConfigError)) {
      throw new Error(
        `booted or failed otherwise (${outcome.ok ? 'booted' : String(outcome.error)}); expected a LockConfigError naming ${c.options.invalid.join(' or ')}`,
        { cause: outcome.ok ? undefined : outcome.error },
      );
    }
    expect(c.options.invalid).toContain(outcome.error.field);
    expect(created.count).toBe(0);
    return 'refused';
  }
  if (!outcome.ok) {
    throw new Error(`valid options failed to boot: ${String(outcome.error)}`, {
      cause: outcome.error,
    });
  }
  const app = outcome.value;
  try {
    expect(created.count).toBe(c.names.length);
    await checkBooted(app, c);
  } finally {
    await within(app.close(), BOOT_MS, 'app.close()');
  }
  return 'worked';
}

async function checkBooted(app: LockTestApp, c: ModuleCase): Promise<void> {
  const { locks, manager } = app;
  const key = 'k';
  for (const name of c.names) {
    const lock = await locks.acquire(key, { backend: name });
    expect(lock.backend).toBe(name);
    // The store sees the prefixed key; the lease is the default ttl.
    expect(await manager.getBackend(name).isLocked(c.keyPrefix + key)).toBe(true);
    const info = await locks.inspect(key, { backend: name });
    expect(info.remainingMs).toBeGreaterThan(0);
    expect(info.remainingMs).toBeLessThanOrEqual(c.ttl);
    await lock.release();
    expect(await locks.isLocked(key, { backend: name })).toBe(false);
  }
  const lock = await locks.acquire(key);
  expect(lock.backend).toBe(c.defaultName);
  await lock.release();
  expect(Object.keys(locks.getMetrics()).sort()).toEqual([...c.names].sort());
  const health = await locks.health();
  expect(Object.keys(health).sort()).toEqual([...c.names].sort());
  for (const name of c.names) expect(health[name].status).toBe('up');
}

/** Counts the memory backends created (a refused configuration must create none). */
function countCreates() {
  const original = memoryBackendFactory.create;
  const counter = {
    count: 0,
    restore: () => {
      memoryBackendFactory.create = original;
    },
  };
  memoryBackendFactory.create = (...args) => {
    counter.count++;
    return original.apply(memoryBackendFactory, args);
  };
  return counter;
}
