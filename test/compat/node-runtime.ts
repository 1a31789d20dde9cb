// Node binaries for the compatibility matrix. The machine has one Node; the other lines come
// from the npm registry as the `node` package (`npm install --prefix DIR node@X` puts the
// official binary at DIR/node_modules/.bin/node), cached outside the clone so that a second run
// installs nothing.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCommand } from '../support/packed-package';

/** Where installed Node binaries are kept, one folder per exact version. */
export function nodeCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'nestjs-distributed-lock', 'node');
}

const pending = new Map<string, Promise<string>>();

/**
 * Path of a `node` executable of exactly `version` (e.g. `24.21.0`): this process's own when it
 * is that version, else the registry's, installed once into the cache. Concurrent calls for one
 * version share the install.
 */
export function nodeBinary(version: string): Promise<string> {
  if (process.version === `v${version}`) return Promise.resolve(process.execPath);
  let found = pending.get(version);
  if (!found) {
    found = installNode(version);
    pending.set(version, found);
  }
  return found;
}

async function installNode(version: string): Promise<string> {
  const dir = path.join(nodeCacheDir(), version);
  const bin = path.join(dir, 'node_modules', '.bin', 'node');
  if (!(await reportsVersion(bin, version))) {
    // A half-finished earlier install is replaced, not trusted.
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    await runCommand(
      'npm',
      [
        'install',
        '--prefix',
        dir,
        `node@${version}`,
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
      ],
      { cwd: dir, timeoutMs: 300_000 },
    );
    if (!(await reportsVersion(bin, version))) {
      throw new Error(`npm install node@${version} did not give ${bin} reporting v${version}`);
    }
  }
  return bin;
}

async function reportsVersion(bin: string, version: string): Promise<boolean> {
  if (!fs.existsSync(bin)) return false;
  try {
    const { stdout } = await runCommand(bin, ['--version'], {
      cwd: os.tmpdir(),
      timeoutMs: 30_000,
    });
    return stdout.trim() === `v${version}`;
  } catch {
    return false;
  }
}
