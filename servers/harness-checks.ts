// What the harness specs (*.spec.ts beside this file) check servers with: is a pid still alive,
// poll until something holds, and a harness run in a separate Node process that leaves a server
// behind, to prove that a server never outlives the process that started it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** True while `pid` is a live process; a zombie (exited, not yet reaped) counts as gone. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Polls `check` every `pollMs` until it holds (true) or `timeoutMs` passes (false). */
export async function eventually(
  check: () => boolean,
  timeoutMs: number,
  pollMs = 20,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  return true;
}

/**
 * Runs `servers/<harness>.ts` in a separate Node process that calls its `start()` export (which
 * resolves with a node), prints the node's pid and dir, then either exits without stopping it
 * (`exit`) or hangs until this function SIGKILLs it (`sigkill`). Resolves, once that process has
 * ended, with the pid and dir of the server it left behind.
 */
export async function leftBehindByChildProcess(
  harness: 'redis-servers' | 'zk-servers',
  start: 'startRedisNode' | 'startZkStandalone',
  ending: 'exit' | 'sigkill',
): Promise<{ pid: number; dir: string }> {
  const root = process.cwd();
  const script = `
    require(${JSON.stringify(join(root, 'servers', `${harness}.ts`))})
      .${start}()
      .then((node) => {
        process.stdout.write(node.pid() + ' ' + node.dir + '\\n');
        if (${JSON.stringify(ending)} === 'sigkill') setInterval(() => {}, 1000);
      });
  `;
  const child = spawn(
    process.execPath,
    ['-r', join(root, 'scripts/ts-register.cjs'), '-e', script],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  const left = await new Promise<{ pid: number; dir: string }>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const [pid, dir] = out.trim().split(' ');
      if (out.includes('\n')) resolve({ pid: Number(pid), dir });
    });
    child.on('exit', (code) => reject(new Error(`harness process exited (${code}) before a pid`)));
  });
  if (ending === 'sigkill') child.kill('SIGKILL');
  await exited;
  return left;
}
