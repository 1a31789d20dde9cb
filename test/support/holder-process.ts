import { expect } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { LockService } from '../../lib/lock.service';
import type { HoldArgs } from './hold-worker';

/** A running hold-worker process that holds one lock. */
export interface HolderProcess {
  child: ChildProcess;
  /** What the holder printed once it held the lock. */
  held: { token: string; fence: number | null };
  /** Resolves when the process has exited (after a kill). */
  exited: Promise<void>;
}

/**
 * Starts `test/support/hold-worker.ts` in its own process and resolves once it holds the lock:
 * the victim of crash tests (`child.kill('SIGKILL')`).
 */
export async function startHolder(args: HoldArgs): Promise<HolderProcess> {
  const root = process.cwd();
  const child = spawn(
    process.execPath,
    [
      '-r',
      join(root, 'scripts/ts-register.cjs'),
      join(root, 'test/support/hold-worker.ts'),
      JSON.stringify(args),
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const held = await new Promise<HolderProcess['held']>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) =>
      resolve(JSON.parse(d.toString().split('\n')[0]) as HolderProcess['held']),
    );
    child.once('exit', (code) => reject(new Error(`holder exited ${code}: ${stderr}`)));
  });
  return { child, held, exited };
}

/**
 * The crash fault every backend goes through: while `holder` holds `key`, `locks` cannot take it;
 * the holder is SIGKILLed; then `locks` acquires `key` (waiting up to `waitTimeoutMs`) within
 * `withinMs` of the holder's exit, with a higher fence than the dead holder's, and releases it.
 */
export async function expectTakeoverAfterSigkill(
  holder: HolderProcess,
  locks: LockService,
  key: string,
  bounds: { waitTimeoutMs: number; withinMs: number },
): Promise<void> {
  expect(await locks.tryAcquire(key)).toBeNull();
  holder.child.kill('SIGKILL');
  await holder.exited;
  const exitedAt = performance.now();
  const lock = await locks.acquire(key, { waitTimeout: bounds.waitTimeoutMs });
  expect(performance.now() - exitedAt).toBeLessThanOrEqual(bounds.withinMs);
  expect(lock.fence).toBeGreaterThan(holder.held.fence!);
  await lock.release();
}
