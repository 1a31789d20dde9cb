/**
 * The chaos matrix, reduced profile (`PROFILES.ci`), as part of `npm test`: every fault against
 * one configuration per backend. A cell passes when the checker finds nothing and the lock came
 * back in time; a known-unsafe cell passes only when the checker does find the violation.
 * The sharing rows (issue 19: a counted slot's or a read hold's holder killed) run on every
 * column whose backend declares the capability; on the others, the request must be refused.
 * The report goes to `.tmp/chaos-matrix-ci.md`; the full profile is `npm run test:chaos`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { stopAll } from '../../servers/redis-servers';
import { stopAllZk } from '../../servers/zk-servers';
import type { ChaosBackend } from './backends';
import { runCell, type CellResult } from './cell';
import { FAULTS, runsOn } from './faults';
import { declaredCapabilities } from './backend-capabilities';
import { runSharingCell, sharingRunsOn } from './sharing-cell';
import { SHARING_SCENARIOS, type SharingScenario } from './sharing-scenarios';
import { createLockApp } from '../support/lock-app';
import { LockConfigError } from '../../lib/errors/lock.errors';
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
    faults: [...FAULTS, ...SHARING_SCENARIOS].map((f) => ({ id: f.id, label: f.label })),
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

    for (const scenario of SHARING_SCENARIOS) {
      const applies = sharingRunsOn(scenario, backend);
      if (applies !== true) {
        skipped.push({ backend: backend.id, fault: scenario.id, reason: applies });
        continue;
      }
      // Which backends can is read from each backend when it runs: until it declares the
      // capability, the case checks that it refuses the request instead of granting a mutex.
      it(`${scenario.label}: given back in time, never over-admitted (or refused: no capabilities.${scenario.capability})`, async () => {
        const capabilities = await declaredCapabilities(backend, profile.timing);
        const runs = sharingRunsOn(scenario, backend, capabilities);
        if (runs !== true) {
          skipped.push({ backend: backend.id, fault: scenario.id, reason: runs });
          await expectRefused(backend, scenario);
          return;
        }
        const cell = await runSharingCell(backend, scenario, profile.timing);
        cells.push(cell);
        const summary = { ...cell, findings: cell.findings.map((f) => f.slice(0, 300)) };
        expect(summary).toMatchObject({ verdict: 'pass', overlaps: 0, fenceViolations: 0 });
        expect(cell.recoveryMs).toBeLessThanOrEqual(cell.boundMs);
      }, 90_000);
    }
  },
);

/** The victim's request of `scenario`, on a backend without its capability: refused, never run as a mutex. */
async function expectRefused(backend: ChaosBackend, scenario: SharingScenario): Promise<void> {
  const app = await createLockApp(backend.options((ep) => ep, profile.timing));
  try {
    const error = await app.locks
      .tryAcquire('chaos-refused', scenario.victim)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConfigError);
    expect(error).toMatchObject({ field: scenario.capability === 'shared' ? 'mode' : 'permits' });
  } finally {
    await app.close();
  }
}

describe('chaos report', () => {
  it('the README reliability section is the one generated from docs/chaos-matrix.json', () => {
    const run = JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')) as MatrixRun;
    const readme = readFileSync('README.md', 'utf8');
    expect(withReadmeBlock(readme, readmeBlock(run))).toBe(readme);
    expect(run.profile).toBe('full');
    expect(run.cells.every((c) => c.verdict !== 'FAIL')).toBe(true);
  });
});
