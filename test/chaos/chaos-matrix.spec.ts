/**
 * The chaos matrix, reduced profile (`PROFILES.ci`), as part of `npm test`: every fault against
 * one configuration per backend. A cell passes when the checker finds nothing and the lock came
 * back in time; a known-unsafe cell passes only when the checker does find the violation.
 * The sharing rows run in `chaos-sharing.spec.ts` (a file of their own, so Jest runs them beside
 * these).
 * The report goes to `.tmp/chaos-matrix-ci.md`; the full profile is `npm run test:chaos`.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { runCell } from './cell';
import { CI_PROFILE, describeCiColumns } from './ci-columns';
import { FAULTS, runsOn } from './faults';
import type { MatrixRun } from './matrix';
import { readmeBlock, withReadmeBlock } from './report';

const profile = CI_PROFILE;

describeCiColumns('chaos matrix', FAULTS, 'chaos-matrix-ci', (backend, { cells, skipped }) => {
  for (const fault of FAULTS) {
    const applies = runsOn(fault, backend);
    if (applies !== true) {
      skipped.push({ backend: backend.id, fault: fault.id, reason: applies });
      // Not a test that passes: a printed reason (only partitions without root end up here).
      if (applies.startsWith('skipped')) console.warn(`${fault.id} × ${backend.id}: ${applies}`);
      continue;
    }
    const unsafe = fault.expectUnsafe?.(backend) ?? false;
    it(`${fault.label}: ${unsafe ? 'known unsafe, the checker catches it' : 'safe and live'}`, async () => {
      const cell = await runCell(backend, fault, profile.timing);
      cells.push(cell);
      const summary = { ...cell, findings: cell.findings.map((f) => f.slice(0, 300)) };
      expect(summary).toMatchObject({ verdict: unsafe ? 'caught' : 'pass', staleAccepted: 0 });
      if (unsafe) expect(cell.overlaps + cell.fenceViolations).toBeGreaterThan(0);
      else expect(cell.recoveryMs).toBeLessThanOrEqual(cell.boundMs);
    }, 90_000);
  }
});

describe('chaos report', () => {
  it('the README reliability section is the one generated from docs/chaos-matrix.json', () => {
    const run = JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')) as MatrixRun;
    const readme = readFileSync('README.md', 'utf8');
    expect(withReadmeBlock(readme, readmeBlock(run))).toBe(readme);
    expect(run.profile).toBe('full');
    expect(run.cells.every((c) => c.verdict !== 'FAIL')).toBe(true);
  });
});
