import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { LockBackendConfig } from '../../lib/backends/backend-config';

/** The secret every probe configuration carries; nothing the module writes may contain it. */
export const SENTINEL = 'Zq9SentinelSecret7x';

/** Everything a probe process wrote, and the codes of the errors it saw, per call. */
export interface ProbeResult {
  /** stdout and stderr together, in full. */
  readonly output: string;
  /** `code` of the error each call rejected with (`acquire`, `health`...), if it rejected. */
  readonly codes: Record<string, string>;
  /** The inspected outcome of each call, for assertions on causes. */
  readonly outcomes: Record<string, string>;
}

/**
 * Runs test/secrets/secret-probe-worker.ts in its own process with `config` as the only
 * backend, so every log line (the Nest logger, client libraries' own stderr prints) is
 * captured, and resolves what it wrote. Bounded by `timeoutMs` (the process is killed after).
 * `setup`: a module (path from the repo root) whose default export turns the JSON `config` into
 * the one the app gets, in the probe process: for what JSON cannot carry (a client or DataSource
 * passed in).
 */
export function runSecretProbe(
  config: LockBackendConfig,
  {
    operationTimeout = 2_000,
    timeoutMs = 60_000,
    setup,
  }: { operationTimeout?: number; timeoutMs?: number; setup?: string } = {},
): Promise<ProbeResult> {
  const root = process.cwd();
  const child = spawn(
    process.execPath,
    [
      '-r',
      join(root, 'scripts/ts-register.cjs'),
      join(root, 'test/secrets/secret-probe-worker.ts'),
      JSON.stringify({ config, operationTimeout, setup }),
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: '0' } },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`secret probe did not finish within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on('close', () => {
      clearTimeout(timer);
      const codes: Record<string, string> = {};
      const outcomes: Record<string, string> = {};
      for (const match of output.matchAll(/^PROBE-CODE (\w+): (.*)$/gm)) codes[match[1]] = match[2];
      for (const match of output.matchAll(/^PROBE (\w+): ([\s\S]*?)(?=^PROBE|$(?![\s\S]))/gm)) {
        outcomes[match[1]] = match[2];
      }
      resolve({ output, codes, outcomes });
    });
  });
}

/** Lines of `output` that contain the sentinel (what a failing test shows). */
export function leaks(output: string): string[] {
  return output.split('\n').filter((line) => line.includes(SENTINEL));
}
