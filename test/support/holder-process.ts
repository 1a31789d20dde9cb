import { expect } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import type { HoldArgs } from './hold-worker';
import { createLockApp, type LockTestApp } from './lock-app';
import { spawnTsWorker } from './ts-worker';

/** A running hold-worker process that holds one lock. */
export interface HolderProcess {
  child: ChildProcess;
  /** What the holder printed once it held the lock. */
  held: { token: string; fence: number | null; permit: number };
  /** Resolves when the process has exited (after a kill). */
  exited: Promise<void>;
}

/**
 * Starts `test/support/hold-worker.ts` in its own process and resolves once it holds the lock:
 * the victim of crash tests (`child.kill('SIGKILL')`).
 */
export async function startHolder(args: HoldArgs): Promise<HolderProcess> {
  const child = spawnTsWorker('hold-worker.ts', args);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const held = await new Promise<HolderProcess['held']>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) =>
      resolve(JSON.parse(d.toString().split('\n')[0]) as HolderProcess['held']),
    );
    child.once('exit', (code) => reject(new Error(`holder exited ${code}: ${stderr}`)));
  });
  return { child, held, exited };
}

/**
 * The crash fault every backend goes through: a holder process takes 'victim' (with `ttl`) under
 * `options`; an app on the same options cannot take it; the holder is SIGKILLed; then the app
 * acquires it (waiting up to `waitTimeoutMs`) within `withinMs` of the holder's exit, with a
 * higher fence than the dead holder's. The holder is killed and the app closed in any case.
 */
export async function expectTakeoverAfterSigkill(
  options: LockModuleOptions,
  bounds: { ttl: number; waitTimeoutMs: number; withinMs: number },
): Promise<void> {
  const holder = await startHolder({ options, key: 'victim', ttl: bounds.ttl });
  let t: LockTestApp | undefined;
  try {
    t = await createLockApp(options);
    expect(await t.locks.tryAcquire('victim')).toBeNull();
    holder.child.kill('SIGKILL');
    await holder.exited;
    const exitedAt = performance.now();
    const lock = await t.locks.acquire('victim', { waitTimeout: bounds.waitTimeoutMs });
    expect(performance.now() - exitedAt).toBeLessThanOrEqual(bounds.withinMs);
    expect(lock.fence).toBeGreaterThan(holder.held.fence!);
    await lock.release();
  } finally {
    holder.child.kill('SIGKILL'); // still alive when an expectation failed before the kill
    await t?.close();
  }
}
