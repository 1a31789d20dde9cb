/**
 * A chaos worker process as the runner sees it: spawned (behind an optional prefix such as
 * `ip netns exec`, with extra environment such as libfaketime's), its printed lines collected,
 * its exit time taken on the runner's monotonic clock. Shared by the mutex cells (cell.ts) and
 * the sharing cells (sharing-cell.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A running (or exited) worker. */
export interface Worker {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<bigint>;
  /** Lines the worker printed. */
  readonly lines: string[];
  stderr: string;
  exitCode?: number | null;
  /** Runner's monotonic time of the exit. */
  exitedAt?: bigint;
  /** Runner's monotonic time just after `killWorker` sent SIGKILL. */
  killedAt?: bigint;
}

/**
 * SIGKILLs `worker` and records when: once `kill` returns the process runs no more code, so its
 * holds end then. Its exit is seen later (the runner's event loop, under load tens of ms after
 * the server already gave a connection-bound lock on), too late to stand for the end.
 */
export function killWorker(worker: Worker): void {
  worker.child.kill('SIGKILL');
  worker.killedAt = process.hrtime.bigint();
}

/** When `worker`'s holds ended, if it died: killed (see {@link killWorker}) or exited. */
export function endOfWorker(worker: Worker): bigint | undefined {
  return worker.killedAt ?? worker.exitedAt;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Spawns `script` (a .ts file under the repo, through scripts/ts-register.cjs) with `args` as
 * one JSON argument (`args.worker` names it), behind `prefix`, with `env` added.
 */
export function startWorker<A extends { readonly worker: string }>(
  script: string,
  args: A,
  prefix: readonly string[] = [],
  env: NodeJS.ProcessEnv = {},
): Worker {
  const root = process.cwd();
  const argv = [
    ...prefix,
    process.execPath,
    '-r',
    join(root, 'scripts/ts-register.cjs'),
    join(root, script),
    JSON.stringify(args),
  ];
  const child = spawn(argv[0], argv.slice(1), {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const worker: Worker = {
    name: args.worker,
    child,
    lines: [],
    stderr: '',
    exited: new Promise<bigint>((resolve) =>
      child.once('exit', (code) => {
        worker.exitCode = code;
        worker.exitedAt = process.hrtime.bigint();
        resolve(worker.exitedAt);
      }),
    ),
  };
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    partial += d.toString();
    const lines = partial.split('\n');
    partial = lines.pop()!;
    worker.lines.push(...lines);
  });
  child.stderr!.on('data', (d: Buffer) => (worker.stderr = keepEnds(worker.stderr + d.toString())));
  return worker;
}

/** Waits until `cond()`; throws after `timeoutMs`, or as soon as `worker` exits. */
export async function waitFor(
  what: string,
  cond: () => boolean,
  timeoutMs: number,
  worker?: Worker,
): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!cond()) {
    if (worker && worker.exitCode !== undefined) {
      throw new Error(
        `${worker.name} exited (${worker.exitCode}) waiting for ${what}: ${worker.stderr}`,
      );
    }
    if (performance.now() > until)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * Stops every worker still running (SIGCONT first: a paused one cannot die of SIGKILL until it
 * runs) and resolves once all have exited.
 */
export async function killAll(workers: readonly Worker[]): Promise<void> {
  for (const w of workers) {
    if (w.exitCode === undefined) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
    }
  }
  await Promise.all(workers.map((w) => w.exited));
}

/**
 * How a cell starts its workers (each waits for its go file): the victim goes first and takes
 * the lock; once it says it holds it, the others go, and get 150 ms to line up behind it (or
 * hold beside it) before the fault strikes.
 */
export async function victimFirst(
  victim: Worker,
  goVictim: string,
  goOthers: string,
): Promise<void> {
  writeFileSync(goVictim, '');
  await waitFor(
    'the victim to hold the lock',
    () => victim.lines.some((l) => l.startsWith('holding')),
    20_000,
    victim,
  );
  writeFileSync(goOthers, '');
  await sleep(150);
}

/** Asks every worker to finish (the stop file each watches) and waits up to 20 s for the exits. */
export async function stopWorkers(workers: readonly Worker[], stopFile: string): Promise<void> {
  writeFileSync(stopFile, '');
  const exitBy = performance.now() + 20_000;
  for (const w of workers) {
    while (w.exitCode === undefined && performance.now() < exitBy) await sleep(20);
  }
}

/**
 * A worker's stderr as kept for a report: its first and last 4,000 characters (an error's
 * message and the first frames come first; a crash's stack comes last).
 */
function keepEnds(text: string): string {
  const END = 4_000;
  if (text.length <= 2 * END + 64) return text;
  return `${text.slice(0, END)}\n[… ${text.length - 2 * END} characters …]\n${text.slice(-END)}`;
}

/**
 * A worker's stderr in one line for a finding: its first two lines (the error and where it
 * was thrown) and its last two (what the process said as it died), without repeats.
 */
export function stderrSummary(stderr: string): string {
  const lines = stderr.trim().split('\n');
  const picked = lines.length <= 4 ? lines : [...lines.slice(0, 2), '…', ...lines.slice(-2)];
  return picked.join(' | ');
}
