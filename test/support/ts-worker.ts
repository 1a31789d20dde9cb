import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

/**
 * Starts `test/support/<script>` (a worker such as hold-worker.ts or lock-worker.ts) in a Node
 * process of its own, from the repo root, with the TypeScript sources loaded through
 * scripts/ts-register.cjs and `arg` as its one JSON argument; stdout and stderr are piped.
 */
export function spawnTsWorker(
  script: string,
  arg: unknown,
): ChildProcessByStdio<null, Readable, Readable> {
  const root = process.cwd();
  return spawn(
    process.execPath,
    [
      '-r',
      join(root, 'scripts/ts-register.cjs'),
      join(root, 'test/support', script),
      JSON.stringify(arg),
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}
