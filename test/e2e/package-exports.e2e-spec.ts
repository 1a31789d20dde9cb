import { describe, it, expect, beforeAll } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

// Jest runs in native ESM mode here (no __dirname) and from the repository root.
const root = process.cwd();

/** Runs `script` in a fresh Node process from the repo root, the way a user would require the package. */
function runNode(script: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, ['-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 25_000,
  });
  return { status: result.status, stdout: result.stdout.trim(), stderr: result.stderr };
}

describe('the built package', () => {
  beforeAll(() => {
    expect(fs.existsSync(path.join(root, 'package.json'))).toBe(true);
    if (!fs.existsSync(path.join(root, 'dist', 'index.js'))) {
      throw new Error(
        'dist/index.js not found: run npm run build first (npm test builds before jest)',
      );
    }
  });

  it('package.json main/types point at built files that exist', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      main?: unknown;
      types?: unknown;
    };
    expect(pkg.main).toBe('dist/index.js');
    expect(pkg.types).toBe('dist/index.d.ts');
    expect(fs.existsSync(path.join(root, pkg.main as string))).toBe(true);
    expect(fs.existsSync(path.join(root, pkg.types as string))).toBe(true);
  });

  it('exports exactly the public runtime API', () => {
    const script =
      "require('reflect-metadata'); const m = require('./'); " +
      'console.log(JSON.stringify(Object.keys(m).sort()))';
    const out = execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out.trim())).toEqual([
      'InjectLockBackend',
      'Leader',
      'LeaderOnly',
      'LeaderService',
      'LockAbortedError',
      'LockBackendError',
      'LockConfigError',
      'LockError',
      'LockLostError',
      'LockModule',
      'LockNotAcquiredError',
      'LockService',
      'LockShuttingDownError',
      'Locked',
      'getLockBackendToken',
    ]);
  });

  it('bootstraps a Nest app from the CommonJS build (require of ESM-only NestJS)', () => {
    const script = `
      require('reflect-metadata');
      const { Module } = require('@nestjs/common');
      const { NestFactory } = require('@nestjs/core');
      const { LockModule, LockService, LockError } = require('./');
      class AppModule {}
      Module({ imports: [LockModule.forRoot({ backends: { main: { type: 'memory' } } })] })(AppModule);
      (async () => {
        const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
        const locks = app.get(LockService);
        const lock = await locks.acquire('pkg-exports');
        if (!lock.isHeld() || lock.backend !== 'main') throw new Error('lock not held');
        if (!(await locks.isLocked('pkg-exports'))) throw new Error('isLocked false while held');
        if ((await locks.tryAcquire('pkg-exports')) !== null) throw new Error('acquired twice');
        await lock.release();
        if (await locks.isLocked('pkg-exports')) throw new Error('still locked after release');
        await app.close();
        const after = await locks.acquire('pkg-exports').then(() => null, (e) => e);
        if (!(after instanceof LockError)) throw new Error('acquire after close did not reject');
        console.log('ok');
      })().catch((err) => {
        console.error(err);
        process.exit(1);
      });
    `;
    const result = runNode(script);
    // stderr is only included when the child failed, so a failure shows why.
    expect({
      status: result.status,
      stdout: result.stdout,
      stderr: result.status === 0 ? '' : result.stderr,
    }).toEqual({ status: 0, stdout: 'ok', stderr: '' });
  });
});
