/**
 * What the chaos spec files (`chaos-matrix.spec.ts`, `chaos-sharing.spec.ts`) share: one
 * `describe` per column of the reduced profile (`PROFILES.ci`), each starting and stopping its
 * own backend, and the run's report written to `.tmp/` after all.
 */
import { afterAll, beforeAll, describe } from '@jest/globals';
import { mkdirSync, writeFileSync } from 'node:fs';
import { stopAll } from '../../servers/redis-servers';
import { stopAllZk } from '../../servers/zk-servers';
import { machineLine } from '../../servers/machine';
import type { ChaosBackend } from './backends';
import type { CellResult } from './cell';
import { PROFILES, type MatrixRun, type SkippedCell } from './matrix';
import { markdownReport } from './report';

/** The reduced profile `npm test` runs. */
export const CI_PROFILE = PROFILES.ci;

/** One spec file's cells and skipped cells, reported when the file ends. */
export interface CiRun {
  readonly cells: CellResult[];
  readonly skipped: SkippedCell[];
}

/**
 * Declares `describe(<title>: <column>)` for every column of the reduced profile, with a fresh
 * backend (it owns its servers and table) started before and stopped after `body`, whose cases
 * push their results to the returned run; after the file, its report of the `rows` goes to
 * `.tmp/<reportName>.md`. `hasCases`: whether `body` declares any case for a column.
 */
export function describeCiColumns(
  title: string,
  rows: readonly { id: string; label: string }[],
  reportName: string,
  body: (backend: ChaosBackend, run: CiRun) => void,
  hasCases: (backend: ChaosBackend) => boolean = () => true,
): void {
  const run: CiRun = { cells: [], skipped: [] };
  const columns: { id: string; label: string }[] = [];
  afterAll(async () => {
    await stopAll();
    await stopAllZk();
    const report: MatrixRun = {
      profile: CI_PROFILE.name,
      timing: CI_PROFILE.timing,
      backends: columns,
      faults: rows.map((f) => ({ id: f.id, label: f.label })),
      cells: run.cells,
      skipped: run.skipped,
      date: new Date().toISOString(),
      machine: machineLine(),
    };
    mkdirSync('.tmp', { recursive: true });
    writeFileSync(`.tmp/${reportName}.md`, markdownReport(report));
  });
  // A column without a case is not declared (Jest refuses hooks in a describe without tests).
  const makers = CI_PROFILE.backends.filter((make) => hasCases(make()));
  describe.each(makers.map((make) => [make().label, make] as const))(
    `${title}: %s`,
    (_label, make) => {
      // A fresh instance per describe (the one above only named it).
      const backend = make();
      columns.push({ id: backend.id, label: backend.label });
      beforeAll(() => backend.start(), 60_000);
      afterAll(() => backend.stop(), 60_000);
      body(backend, run);
    },
  );
}
