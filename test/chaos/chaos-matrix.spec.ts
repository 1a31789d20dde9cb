/**
 * The chaos matrix, reduced profile (`PROFILES.ci`), as part of `npm test`: every fault against
 * one configuration per backend. A cell passes when the checker finds nothing and the lock came
 * back in time; a known-unsafe cell passes only when the checker does find the violation.
 * The sharing rows run in `chaos-sharing.spec.ts` (a file of their own, so Jest runs them beside
 * these).
 * The report goes to `.tmp/chaos-matrix-ci.md`; the full profile is `npm run test:chaos`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { stopAll } from '../../servers/redis-servers';
import { stopAllZk } from '../../servers/zk-servers';
import type { ChaosBackend } from './backends';
import { runCell, type CellResult } from './cell';
import { FAULTS, runsOn } from './faults';
import { machineLine } from '../../servers/machine';
import { PROFILES, type MatrixRun, type SkippedCell } from './matrix';
import { markdownReport, readmeBlock, withReadmeBlock } from './report';

const profile = PROFILES.ci;
const cells: CellResult[] = [];
const skipped: SkippedCell[] = [];
const columns: { id: string; label: string }[] = [];

afterAll(async () => {
  await stopAll();
  await stopAllZk();
  const run: MatrixRun = {
    profile: profile.name,
    timing: profile.timing,
    backends: columns,
    faults: FAULTS.map((f) => ({ id: f.id, label: f.label })),
    cells,
    skipped,
    date: new Date().toISOString(),
    machine: machineLine(),
  };
  mkdirSync('.tmp', { recursive: true });
  writeFileSync('.tmp/chaos-matrix-ci.md', markdownReport(run));
});

describe.each(profile.backends.map((make) => [make().label, make] as const))(
  'chaos matrix: %s',
  (_label, make) => {
    // A fresh instance per describe (the one above only named it): it owns its servers and table.
    const backend: ChaosBackend = make();
    columns.push({ id: backend.id, label: backend.label });
    beforeAll(() => backend.start(), 60_000);
    afterAll(() => backend.stop(), 60_000);

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
  },
);

describe('chaos report', () => {
  it('the README reliability section is the one generated from docs/chaos-matrix.json', () => {
    const run = JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')) as MatrixRun;
    const readme = readFileSync('README.md', 'utf8');
    expect(withReadmeBlock(readme, readmeBlock(run))).toBe(readme);
    expect(run.profile).toBe('full');
    expect(run.cells.every((c) => c.verdict !== 'FAIL')).toBe(true);
  });
});
