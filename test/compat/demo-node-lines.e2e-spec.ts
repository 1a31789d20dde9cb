/**
 * The README's first command (`npm run demo`) on every supported Node line, not just the one
 * the suite runs on: the demo, its three app processes and their SQLite store run on Node 22
 * and 24 too (with the better-sqlite3 that works there, see scripts/sqlite-driver.cjs).
 */
import { describe, expect, it } from '@jest/globals';
import * as path from 'node:path';
import { REPO_ROOT, runCommand } from '../support/packed-package';
import { NODE_RELEASES } from './cells';
import { nodeBinary } from './node-runtime';

const OTHER_LINES = Object.values(NODE_RELEASES).filter((v) => `v${v}` !== process.version);

describe('npm run demo on every Node line', () => {
  it.each(OTHER_LINES)(
    'Node %s: the demo passes its own verdict',
    async (version) => {
      const node = await nodeBinary(version);
      // What `npm run demo` runs, with this Node; its app processes inherit it (process.execPath).
      const { stdout } = await runCommand(
        node,
        ['-r', path.join(REPO_ROOT, 'scripts', 'ts-register.cjs'), 'sample-app/demo/demo.ts'],
        { cwd: REPO_ROOT, timeoutMs: 240_000, env: { LOCK_BACKEND: undefined, STORE: undefined } },
      );
      expect(stdout).toContain('VERDICT: PASS');
    },
    300_000,
  );
});
