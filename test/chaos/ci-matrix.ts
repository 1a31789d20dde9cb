/**
 * The chaos matrix's mutex rows, reduced profile (`PROFILES.ci`), as part of `npm test`: every
 * fault against one configuration per backend. A cell passes when the checker finds nothing and
 * the lock came back in time; a known-unsafe cell passes only when the checker does find the
 * violation. One spec file per store (`chaos-matrix-<store>.spec.ts`, each one call of
 * {@link describeCiMatrix}): one file of all columns took minutes, and when Jest started it
 * late it ran alone at the end. `chaos-report.spec.ts` checks that every column has its file.
 * The sharing rows run in `chaos-sharing.spec.ts`; the full profile is `npm run test:chaos`.
 */
import { expect, it } from '@jest/globals';
import { runCell } from './cell';
import { CI_PROFILE, describeCiColumns, expectVerdict, storeOf } from './ci-columns';
import { FAULTS, runsOn } from './faults';

/** The spec file of a store's columns. */
export function ciMatrixFile(store: string): string {
  return `test/chaos/chaos-matrix-${store}.spec.ts`;
}

/** Declares every mutex cell of the columns on `store`; the report goes to `.tmp/chaos-matrix-ci-<store>.md`. */
export function describeCiMatrix(store: string): void {
  describeCiColumns(
    'chaos matrix',
    FAULTS,
    `chaos-matrix-ci-${store}`,
    (backend, { cells, skipped }) => {
      for (const fault of FAULTS) {
        const applies = runsOn(fault, backend);
        if (applies !== true) {
          skipped.push({ backend: backend.id, fault: fault.id, reason: applies });
          // Not a test that passes: a printed reason (only partitions without root end up here).
          if (applies.startsWith('skipped'))
            console.warn(`${fault.id} × ${backend.id}: ${applies}`);
          continue;
        }
        const unsafe = fault.expectUnsafe?.(backend) ?? false;
        it(`${fault.label}: ${unsafe ? 'known unsafe, the checker catches it' : 'safe and live'}`, async () => {
          const cell = await runCell(backend, fault, CI_PROFILE.timing);
          cells.push(cell);
          expectVerdict(cell, unsafe ? 'caught' : 'pass');
          expect(cell.staleAccepted).toBe(0);
          if (unsafe) expect(cell.overlaps + cell.fenceViolations).toBeGreaterThan(0);
          else expect(cell.recoveryMs).toBeLessThanOrEqual(cell.boundMs);
        }, 90_000);
      }
    },
    (backend) => storeOf(backend) === store,
  );
}
