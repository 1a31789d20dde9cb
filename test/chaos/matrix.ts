/**
 * The chaos matrix: which backends and faults a profile runs, with which timing, in which order.
 * Each backend's servers are started once for all its cells and stopped after them.
 */
import {
  redisBackend,
  redlockBackend,
  sqlBackend,
  zookeeperBackend,
  type ChaosBackend,
  type ChaosTiming,
} from './backends';
import { runCell, type CellResult } from './cell';
import { declaredCapabilities } from './backend-capabilities';
import { FAULTS, runsOn, type Fault } from './faults';
import { runSharingCell, sharingRunsOn } from './sharing-cell';
import { SHARING_SCENARIOS, type SharingScenario } from './sharing-scenarios';
import { LEADER_WORKER, LEADERSHIP_ROWS, leadershipTiming } from './leadership-rows';
import { machineLine } from '../../servers/machine';

/** A named set of backends and timing. */
export interface ChaosProfile {
  readonly name: 'ci' | 'full';
  readonly timing: ChaosTiming;
  /** Backend factories, in column order. */
  readonly backends: readonly (() => ChaosBackend)[];
  /** Times each applicable cell runs (every run must pass). */
  readonly repeat: number;
}

const everyBackend = [
  () => redisBackend(true),
  () => redisBackend(false),
  redlockBackend,
  zookeeperBackend,
  () => sqlBackend('postgres', 'table'),
  () => sqlBackend('postgres', 'for-update'),
  () => sqlBackend('postgres', 'advisory'),
  () => sqlBackend('mariadb', 'table'),
  () => sqlBackend('mariadb', 'for-update'),
  () => sqlBackend('mariadb', 'advisory'),
  () => sqlBackend('sqlite', 'table'),
];

export const PROFILES: Record<ChaosProfile['name'], ChaosProfile> = {
  /**
   * What `npm test` runs: every fault, one database per SQL strategy, short timings, once; and
   * the black hole on the other database of each session strategy (the server-side bound).
   */
  ci: {
    name: 'ci',
    timing: {
      ttl: 1_000,
      zkSessionTimeout: 2_000,
      zkTtl: 5_000,
      sqlSessionTimeout: 1_000,
      faultMs: 2_200,
      strikeHoldMs: 3_500,
    },
    backends: [
      () => redisBackend(true),
      () => redisBackend(false),
      redlockBackend,
      zookeeperBackend,
      () => sqlBackend('postgres', 'table'),
      () => sqlBackend('mariadb', 'for-update'),
      () => sqlBackend('postgres', 'advisory'),
      () => sqlBackend('sqlite', 'table'),
      () => sqlBackend('postgres', 'for-update', ['blackhole']),
      () => sqlBackend('mariadb', 'advisory', ['blackhole']),
    ],
    repeat: 1,
  },
  /** `npm run test:chaos`: every backend and strategy, longer timings (`--repeat n`: each cell n times). */
  full: {
    name: 'full',
    timing: {
      ttl: 2_000,
      zkSessionTimeout: 3_000,
      zkTtl: 9_000,
      sqlSessionTimeout: 2_000,
      faultMs: 4_000,
      strikeHoldMs: 6_000,
    },
    backends: everyBackend,
    repeat: 1,
  },
};

/** A cell that was not run, and why. */
export interface SkippedCell {
  readonly backend: string;
  readonly fault: string;
  readonly reason: string;
}

/** Everything one run produced. */
export interface MatrixRun {
  readonly profile: ChaosProfile['name'];
  readonly timing: ChaosTiming;
  readonly backends: readonly { id: string; label: string }[];
  readonly faults: readonly { id: string; label: string }[];
  readonly cells: readonly CellResult[];
  readonly skipped: readonly SkippedCell[];
  readonly date: string;
  /** OS, CPUs and Node of the machine it ran on. */
  readonly machine: string;
}

/**
 * Runs a profile; `only` filters by backend id and fault id (substring match), `onCell` sees
 * each result as it comes.
 */
export async function runMatrix(
  profile: ChaosProfile,
  opts: { only?: { backend?: string; fault?: string }; onCell?: (cell: CellResult) => void } = {},
): Promise<MatrixRun> {
  const cells: CellResult[] = [];
  const skipped: SkippedCell[] = [];
  const columns: { id: string; label: string }[] = [];
  const faults = FAULTS.filter((f) => !opts.only?.fault || f.id.includes(opts.only.fault));
  const scenarios = SHARING_SCENARIOS.filter(
    (s) => !opts.only?.fault || s.id.includes(opts.only.fault),
  );
  const leaderRows = LEADERSHIP_ROWS.filter(
    (f) => !opts.only?.fault || f.id.includes(opts.only.fault),
  );
  for (const make of profile.backends) {
    const backend = make();
    if (opts.only?.backend && !backend.id.includes(opts.only.backend)) continue;
    columns.push({ id: backend.id, label: backend.label });
    const todo: Fault[] = [];
    for (const fault of faults) {
      const applies = runsOn(fault, backend);
      if (applies === true) todo.push(fault);
      else skipped.push({ backend: backend.id, fault: fault.id, reason: applies });
    }
    const sharing: SharingScenario[] = [];
    for (const scenario of scenarios) {
      const applies = sharingRunsOn(scenario, backend);
      if (applies === true) sharing.push(scenario);
      else skipped.push({ backend: backend.id, fault: scenario.id, reason: applies });
    }
    const leading: Fault[] = [];
    for (const row of leaderRows) {
      const applies = runsOn(row, backend);
      if (applies === true) leading.push(row);
      else skipped.push({ backend: backend.id, fault: row.id, reason: applies });
    }
    if (todo.length === 0 && sharing.length === 0 && leading.length === 0) continue;
    await backend.start();
    const record = (cell: CellResult): void => {
      cells.push(cell);
      opts.onCell?.(cell);
    };
    try {
      for (const fault of todo) {
        for (let i = 0; i < profile.repeat; i++) {
          record(await runCell(backend, fault, profile.timing));
        }
      }
      // The sharing rows a backend gets are the capabilities it declares, read from it.
      const capabilities =
        sharing.length > 0 ? await declaredCapabilities(backend, profile.timing) : undefined;
      for (const scenario of sharing) {
        const applies = sharingRunsOn(scenario, backend, capabilities);
        if (applies !== true) {
          skipped.push({ backend: backend.id, fault: scenario.id, reason: applies });
          continue;
        }
        for (let i = 0; i < profile.repeat; i++) {
          record(await runSharingCell(backend, scenario, profile.timing));
        }
      }
      for (const row of leading) {
        for (let i = 0; i < profile.repeat; i++) {
          record(await runCell(backend, row, leadershipTiming(profile.timing), LEADER_WORKER));
        }
      }
    } finally {
      await backend.stop();
    }
  }
  return {
    profile: profile.name,
    timing: profile.timing,
    backends: columns,
    faults: [...faults, ...scenarios, ...leaderRows].map((f) => ({ id: f.id, label: f.label })),
    cells,
    skipped,
    date: new Date().toISOString(),
    machine: machineLine(),
  };
}
