/**
 * What the chaos spec files do not check cell by cell: the README's reliability section is the
 * one generated from the full profile's run, and every column of the reduced profile runs in
 * the spec file of its store (a column without one would silently not run).
 */
import { describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { CI_PROFILE, storeOf } from './ci-columns';
import { ciMatrixFile } from './ci-matrix';
import type { MatrixRun } from './matrix';
import { readmeBlock, withReadmeBlock } from './report';

describe('chaos report', () => {
  it('the README reliability section is the one generated from docs/chaos-matrix.json', () => {
    const run = JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')) as MatrixRun;
    const readme = readFileSync('README.md', 'utf8');
    expect(withReadmeBlock(readme, readmeBlock(run))).toBe(readme);
    expect(run.profile).toBe('full');
    expect(run.cells.every((c) => c.verdict !== 'FAIL')).toBe(true);
  });

  it('every column of the reduced profile runs in the spec file of its store', () => {
    const stores = new Set(CI_PROFILE.backends.map((make) => storeOf(make())));
    for (const store of stores) {
      const file = ciMatrixFile(store);
      expect([file, existsSync(file)]).toEqual([file, true]);
      expect(readFileSync(file, 'utf8')).toContain(`describeCiMatrix('${store}');`);
    }
  });
});
