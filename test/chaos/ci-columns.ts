/**
 * What the chaos spec files (`chaos-matrix-<store>.spec.ts`, `chaos-sharing.spec.ts`) share:
 * one `describe` per column of the reduced profile (`PROFILES.ci`), each starting and stopping
 * its own backend, and the file's report written to `.tmp/` after all.
 */
import { afterAll, beforeAll, describe, expect } from '@jest/globals';
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
 * The store a column runs on, from its id (`redis` for both Redis columns, `postgres` for every
 * PostgreSQL strategy): the mutex rows run in one spec file per store, so Jest's two workers
 * share them out (see `ci-matrix.ts`).
 */
export function storeOf(backend: ChaosBackend): string {
  return backend.id.split('-')[0];
}

/**
 * Declares `describe(<title>: <column>)` for every column of the reduced profile that `columns`
 * keeps, with a fresh backend (it owns its servers and table) started before and stopped after
 * `body`, whose cases push their results to the returned run; after the file, its report of the
 * `rows` goes to `.tmp/<reportName>.md`. `columns` must leave out a column for which `body`
 * declares no case (Jest refuses hooks in a describe without tests).
 */
export function describeCiColumns(
  title: string,
  rows: readonly { id: string; label: string }[],
  reportName: string,
  body: (backend: ChaosBackend, run: CiRun) => void,
  columns: (backend: ChaosBackend) => boolean,
): void {
  const run: CiRun = { cells: [], skipped: [] };
  const declared: { id: string; label: string }[] = [];
  afterAll(async () => {
    await stopAll();
    await stopAllZk();
    const report: MatrixRun = {
      profile: CI_PROFILE.name,
      timing: CI_PROFILE.timing,
      backends: declared,
      faults: rows.map((f) => ({ id: f.id, label: f.label })),
      cells: run.cells,
      skipped: run.skipped,
      date: new Date().toISOString(),
      machine: machineLine(),
    };
    mkdirSync('.tmp', { recursive: true });
    writeFileSync(`.tmp/${reportName}.md`, markdownReport(report));
  });
  const makers = CI_PROFILE.backends.filter((make) => columns(make()));
  describe.each(makers.map((make) => [make().label, make] as const))(
    `${title}: %s`,
    (_label, make) => {
      // A fresh instance per describe (the one above only named it).
      const backend = make();
      declared.push({ id: backend.id, label: backend.label });
      beforeAll(() => backend.start(), 60_000);
      afterAll(() => backend.stop(), 60_000);
      body(backend, run);
    },
  );
}

/**
 * Asserts that `cell` got the verdict `expected`. When it did not, the failure shows the
 * cell's findings (each cut to 300 characters) beside its verdict: they say why (a worker's
 * error, a late recovery, an overlap), and a CI log is often all there is to go on.
 */
export function expectVerdict(cell: CellResult, expected: CellResult['verdict']): void {
  const findings = cell.verdict === expected ? [] : cell.findings.map((f) => f.slice(0, 300));
  expect({ verdict: cell.verdict, findings }).toEqual({ verdict: expected, findings: [] });
}
