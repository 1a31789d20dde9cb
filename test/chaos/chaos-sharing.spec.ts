/**
 * The chaos matrix's sharing rows (issue 19), reduced profile (`PROFILES.ci`), as part of
 * `npm test`: a counted slot's or a read hold's holder killed with `kill -9` while others wait,
 * on every column whose backend declares the capability (read from the backend when it runs);
 * on the others, the request must be refused with `LockConfigError`. A file of its own so Jest
 * runs it beside the mutex rows (`chaos-matrix-<store>.spec.ts`). The report goes to
 * `.tmp/chaos-sharing-ci.md`.
 */
import { expect, it } from '@jest/globals';
import type { ChaosBackend } from './backends';
import { declaredCapabilities } from './backend-capabilities';
import { CI_PROFILE, describeCiColumns, expectVerdict } from './ci-columns';
import { runSharingCell, sharingRunsOn } from './sharing-cell';
import { SHARING_SCENARIOS, type SharingScenario } from './sharing-scenarios';
import { createLockApp } from '../support/lock-app';
import { LockConfigError } from '../../lib/errors/lock.errors';

const profile = CI_PROFILE;

describeCiColumns(
  'chaos matrix, sharing rows',
  SHARING_SCENARIOS,
  'chaos-sharing-ci',
  (backend, { cells, skipped }) => {
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
        expectVerdict(cell, 'pass');
        expect({ overlaps: cell.overlaps, fenceViolations: cell.fenceViolations }).toEqual({
          overlaps: 0,
          fenceViolations: 0,
        });
        expect(cell.recoveryMs).toBeLessThanOrEqual(cell.boundMs);
      }, 90_000);
    }
  },
  // The columns where some row applies (the others would have no case).
  (backend) => SHARING_SCENARIOS.some((scenario) => sharingRunsOn(scenario, backend) === true),
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
