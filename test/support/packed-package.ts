// What the packaging tests share: running a command as a user's shell would (no `npm_*` variables
// of an enclosing `npm run`), building `dist` when stale, and packing the tarball users install.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The repository root (Jest runs from it; it has no __dirname in ESM mode). */
export const REPO_ROOT = process.cwd();

/** What a finished command printed. */
export interface RunResult {
  stdout: string;
  stderr: string;
}

/** Options of {@link runCommand}. */
export interface RunOptions {
  cwd: string;
  timeoutMs: number;
  /** Added to (or, when `undefined`, removed from) the environment. */
  env?: Record<string, string | undefined>;
}

/** A command that failed, with what it printed. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

/**
 * Runs a command without the `npm_*` variables of an enclosing `npm run` (they carry the repo's
 * prefix and config, which would leak into a temp app's install). Rejects with a CommandError.
 */
export function runCommand(
  cmd: string,
  args: readonly string[],
  opts: RunOptions,
): Promise<RunResult> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...process.env, ...opts.env })) {
    if (value !== undefined && !name.toLowerCase().startsWith('npm_')) env[name] = value;
  }
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        cwd: opts.cwd,
        env,
        encoding: 'utf8',
        timeout: opts.timeoutMs,
        maxBuffer: 32 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        if (error) {
          const shown = [cmd, ...args].join(' ');
          reject(
            new CommandError(
              `${shown} (in ${opts.cwd}) failed: ${error.message}\n${stdout}\n${stderr}`,
              stdout,
              stderr,
            ),
          );
        } else {
          resolve({ stdout, stderr });
        }
      },
    );
  });
}

export function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
}

/** `dist` is missing or older than a source file of the build (npm test builds first anyway). */
export function distIsStale(): boolean {
  const built = path.join(REPO_ROOT, 'dist', 'index.js');
  if (!fs.existsSync(built)) return true;
  const builtAt = fs.statSync(built).mtimeMs;
  const sources = fs
    .readdirSync(path.join(REPO_ROOT, 'lib'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));
  return sources.some((f) => fs.statSync(path.join(REPO_ROOT, 'lib', f)).mtimeMs > builtAt);
}

/** Exact version of `name` in the repo's package-lock, so a temp app tests what CI tests. */
export function lockedVersion(name: string): string {
  const lock = readJson<{ packages: Record<string, { version?: string }> }>(
    path.join(REPO_ROOT, 'package-lock.json'),
  );
  const version = lock.packages[`node_modules/${name}`]?.version;
  if (!version) throw new Error(`${name} is not in package-lock.json`);
  return version;
}

/** The packed tarball. */
export interface PackedTarball {
  /** Absolute path of the `.tgz`. */
  file: string;
  /** Paths inside the package, as `npm pack` listed them. */
  files: string[];
}

/** Builds `dist` when it is missing or stale. */
export async function ensureBuilt(): Promise<void> {
  if (distIsStale()) {
    await runCommand('npm', ['run', 'build', '--silent'], { cwd: REPO_ROOT, timeoutMs: 120_000 });
  }
}

/** Builds `dist` if stale and runs `npm pack` into `destDir`. */
export async function packTarball(destDir: string): Promise<PackedTarball> {
  await ensureBuilt();
  const packed = await runCommand(
    'npm',
    ['pack', '--json', '--loglevel=error', '--pack-destination', destDir],
    { cwd: REPO_ROOT, timeoutMs: 60_000 },
  );
  const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
  return { file: path.join(destDir, info.filename), files: info.files.map((f) => f.path) };
}
