/**
 * The chaos matrix's leadership rows (see leadership-rows.ts), reduced profile (`PROFILES.ci`),
 * as part of `npm test`: the leader killed, paused past its lease, or partitioned, on every
 * column where the fault applies. A cell passes when the history checker finds no two leaders at
 * once, no term out of order and no lost update, the fenced resource accepted no late write
 * under an old term, and another candidate led within the bound. The report goes to
 * `.tmp/chaos-leadership-ci.md`.
 */
import { expect, it } from '@jest/globals';
import { runCell } from './cell';
import { CI_PROFILE, describeCiColumns, expectVerdict } from './ci-columns';
import { runsOn } from './faults';
import { LEADER_WORKER, LEADERSHIP_ROWS, leadershipTiming } from './leadership-rows';

const timing = leadershipTiming(CI_PROFILE.timing);

describeCiColumns(
  'chaos matrix, leadership rows',
  LEADERSHIP_ROWS,
  'chaos-leadership-ci',
  (backend, { cells, skipped }) => {
    for (const row of LEADERSHIP_ROWS) {
      const applies = runsOn(row, backend);
      if (applies !== true) {
        skipped.push({ backend: backend.id, fault: row.id, reason: applies });
        // Not a test that passes: a printed reason (only partitions without root end up here).
        if (applies.startsWith('skipped')) console.warn(`${row.id} × ${backend.id}: ${applies}`);
        continue;
      }
      it(`${row.label}: one leader at a time, terms rising, a new leader in time`, async () => {
        const cell = await runCell(backend, row, timing, LEADER_WORKER);
        cells.push(cell);
        expectVerdict(cell, 'pass');
        expect(cell.staleAccepted).toBe(0);
        expect(cell.recoveryMs).toBeLessThanOrEqual(cell.boundMs);
        // The leaders worked: ticks before and after the fault.
        expect(cell.sections).toBeGreaterThan(1);
      }, 90_000);
    }
  },
  (backend) => LEADERSHIP_ROWS.some((row) => runsOn(row, backend) === true),
);
