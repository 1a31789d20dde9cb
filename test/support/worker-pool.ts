import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import { checkHistory, readHistory, type CheckResult, type HistoryEvent } from './history';
import type { WorkerArgs } from './lock-worker';
import { spawnTsWorker } from './ts-worker';

/** Result of a multi-process run: the history files to check and the final witness value. */
export interface WorkerRun {
  historyFiles: string[];
  witnessFile: string;
  dir: string;
  /** Removes the run's temp directory. */
  cleanup(): void;
}

/** Options of runLockWorkers(). */
export interface LockWorkersOptions {
  count: number;
  optionsFor: (index: number) => LockModuleOptions;
  key: string;
  rounds: number;
  holdMs: number;
  ttl?: number;
  via?: 'decorator' | 'withLock';
  timeoutMs?: number;
}

/** A finished run as the history checker sees it (see judgeLockWorkers). */
export interface JudgedRun {
  /** Every worker's history events. */
  events: HistoryEvent[];
  /** The witness counter's final value. */
  final: number;
  /** checkHistory() of the events, with the counter as the key's final witness value. */
  result: CheckResult;
}

/**
 * Starts `count` lock-worker processes (each its own Nest app with `optionsFor(i)`), releases
 * them together through a start barrier so they really contend, and waits for all to exit 0.
 */
export async function runLockWorkers(opts: LockWorkersOptions): Promise<WorkerRun> {
  const dir = mkdtempSync(join(tmpdir(), 'lock-workers-'));
  const witnessFile = join(dir, 'witness');
  const goFile = join(dir, 'go');
  writeFileSync(witnessFile, '0');
  const historyFiles: string[] = [];
  const children = Array.from({ length: opts.count }, (_, i) => {
    const historyFile = join(dir, `w${i}.jsonl`);
    historyFiles.push(historyFile);
    const args: WorkerArgs = {
      worker: `w${i}`,
      options: opts.optionsFor(i),
      key: opts.key,
      rounds: opts.rounds,
      holdMs: opts.holdMs,
      ttl: opts.ttl,
      via: opts.via,
      historyFile,
      witnessFile,
      goFile,
    };
    const child = spawnTsWorker('lock-worker.ts', args);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
      child.once('exit', (code) =>
        reject(new Error(`worker w${i} exited (${code}) before ready: ${stderr}`)),
      );
    });
    const exited = new Promise<void>((resolve, reject) => {
      child.once('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`worker w${i} exited ${code}: ${stderr}`)),
      );
    });
    return { child, ready, exited };
  });

  const timeout = opts.timeoutMs ?? 60_000;
  const timer = setTimeout(() => children.forEach((c) => c.child.kill('SIGKILL')), timeout);
  try {
    await Promise.all(children.map((c) => c.ready));
    writeFileSync(goFile, 'go');
    await Promise.all(children.map((c) => c.exited));
  } catch (err) {
    children.forEach((c) => c.child.kill('SIGKILL'));
    await Promise.allSettled(children.map((c) => c.exited));
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return {
    historyFiles,
    witnessFile,
    dir,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * runLockWorkers(opts), then reads every worker's history and the witness counter, checks them,
 * and hands the lot to `expectations`; the run's temp dir is removed whatever they conclude.
 */
export async function judgeLockWorkers(
  opts: LockWorkersOptions,
  expectations: (run: JudgedRun) => void,
): Promise<void> {
  const run = await runLockWorkers(opts);
  try {
    const events = readHistory(run.historyFiles);
    const final = Number(readFileSync(run.witnessFile, 'utf8'));
    const result = checkHistory(events, { witnessFinal: { [opts.key]: final } });
    expectations({ events, final, result });
  } finally {
    run.cleanup();
  }
}
