/**
 * Runs sample-app/app/main.ts as child processes (for the demo, the e2e tests and the bench):
 * start with an environment, wait for its "listening on <url>" line, stop it. Every child is
 * tracked so a launcher can always kill what it started, and runs with EXIT_WITH_PARENT=1 so
 * it also exits if the launcher dies without cleaning up (even by SIGKILL: its stdin pipe then
 * closes).
 * Paths are relative to process.cwd(), the repo root under npm scripts and Jest.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';

/** A running app process. */
export interface AppProcess {
  /** Name given at start, for messages. */
  readonly name: string;
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly pid: number;
  /** The last few KB of its stdout and stderr. */
  output(): string;
  /** SIGSTOP: the process freezes (keeps its sockets, answers nothing), like a long GC pause. */
  freeze(): void;
  /** SIGCONT after freeze(). */
  thaw(): void;
  /** SIGTERM (graceful: locks released, connections closed), SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL: the process dies at once, releasing nothing (a crash); resolves once it exited. */
  crash(): Promise<void>;
}

/**
 * The app's entry point, relative to the repo root. A path, not an import: the demo side only
 * ever runs the app as a separate process, as an operator would.
 */
const APP_ENTRY = 'sample-app/app/main.ts';
const READY_LINE = /listening on (http:\/\/\S+)/;
const OUTPUT_LIMIT = 8_192;
const DEFAULT_READY_TIMEOUT_MS = 45_000;

/**
 * The app's own variables, blanked (the app treats empty as unset): spread first into a test's
 * env so that whatever the developer's shell exports cannot change what the test runs.
 * Connection variables (PGHOST, MYSQL_HOST, ...) stay: the test databases honour them too.
 */
export const CLEAN_APP_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  [
    'HOST',
    'STORE',
    'LOCK_BACKEND',
    'LOCK_STRATEGY',
    'REDIS_URL',
    'REDLOCK_URLS',
    'ZK_CONNECT',
    'LOCK_TTL_MS',
    'LOCK_WAIT_MS',
    'LOCK_POOL_SIZE',
    'LOCK_RESTART_GUARD_MS',
    'DEDUCT_MODE',
    'SEGMENTS',
    'DEDUCT_WORK_MS',
    'PRICE_READ_MS',
    'REPRICE_STEP_MS',
    'PAYMENT_PROVIDER_LIMIT',
    'PAYMENT_LATENCY_MS',
    'TABLE_PREFIX',
    'REPORT_CRON',
    'REPORT_LEADER_TTL_MS',
    'REPORT_RUNS_FILE',
  ].map((name) => [name, '']),
);

/** Children not yet exited. */
const running = new Set<ChildProcessWithoutNullStreams>();

/**
 * Starts one app process with `env` on top of this process's environment (PORT defaults to 0,
 * a free port). Resolves once it listens; rejects, having killed it, if it exits or stays
 * silent for `readyTimeoutMs`.
 */
export function startApp(
  name: string,
  env: Record<string, string>,
  readyTimeoutMs = DEFAULT_READY_TIMEOUT_MS,
): Promise<AppProcess> {
  const root = process.cwd();
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.cjs'), join(root, APP_ENTRY)],
    {
      cwd: root,
      env: { ...process.env, PORT: '0', ...env, EXIT_WITH_PARENT: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  running.add(child);
  let output = '';
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running.delete(child);
      resolve();
    });
    child.once('error', () => {
      running.delete(child);
      resolve();
    });
  });
  const record = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-OUTPUT_LIMIT);
  };
  child.stderr.on('data', record);
  child.stdin.on('error', () => undefined); // EPIPE when it has already exited

  return new Promise<AppProcess>((resolve, reject) => {
    let settled = false;
    const fail = (reason: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      void exited.then(() =>
        reject(new Error(`app ${name} ${reason}; its output:\n${output.trim() || '(none)'}`)),
      );
    };
    const timer = setTimeout(() => fail(`not ready after ${readyTimeoutMs} ms`), readyTimeoutMs);
    child.once('exit', (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before ready`));
    child.once('error', (err) => fail(`could not start: ${err.message}`));
    child.stdout.on('data', (chunk: Buffer) => {
      record(chunk);
      const match = READY_LINE.exec(output);
      if (match === null || settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(handle(name, match[1], child, exited, () => output));
    });
  });
}

/** Stops every app process still running (in parallel). */
export async function stopAllApps(graceMs?: number): Promise<void> {
  await Promise.all([...running].map((child) => stopChild(child, graceMs)));
}

/** SIGKILLs every app process still running, synchronously (for `process.on('exit')`). */
export function killAllAppsNow(): void {
  for (const child of running) child.kill('SIGKILL');
}

function handle(
  name: string,
  url: string,
  child: ChildProcessWithoutNullStreams,
  exited: Promise<void>,
  output: () => string,
): AppProcess {
  const pid = child.pid ?? -1;
  return {
    name,
    url,
    pid,
    output,
    freeze: () => void child.kill('SIGSTOP'),
    thaw: () => void child.kill('SIGCONT'),
    stop: async (graceMs?: number) => {
      await stopChild(child, graceMs);
      await exited;
    },
    crash: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

async function stopChild(child: ChildProcessWithoutNullStreams, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  child.kill('SIGCONT'); // a frozen process must run to handle SIGTERM
  const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(force);
}
