/**
 * `npm run bench` must not rot: every suite runs in the smoke profile (tiny rounds; its figures
 * mean nothing) and writes its JSON, markdown and charts; and the README's benchmark section
 * must be exactly the one rendered from the committed `bench/results/latest.json`.
 */
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DistinctKeysResult } from '../../bench/harness/distinct-keys';
import type { ContendedResult } from '../../bench/harness/contended';
import type { HeldResult } from '../../bench/harness/held';
import type { PgConnectionPeak } from '../../bench/harness/pg-connections';
import { SQL_CONTENDERS } from '../../bench/harness/sql-contenders';
import type { BenchRun, SuiteResult } from '../../bench/harness/result';
import type { SharingResult } from '../../bench/harness/sharing-load';
import type { WaitersResult, WaitersRun } from '../../bench/harness/waiters';
import { readmeBlock, renderReadmeBlock } from '../../bench/report/readme';

const SUITES = [
  'redis-cycle',
  'redis-contended',
  'zookeeper',
  'databases',
  'sql-contended',
  'decorator',
  'sample-app',
  'scale',
  'semaphore',
  'read-write',
];

/** The scale suite's targets: measured only where the profile reaches 10k and 100k held locks. */
const SCALE_TARGETS = [
  'scale-held-10k-calls',
  'scale-held-10k-cpu',
  'scale-held-100k-cpu',
  'scale-held-100k-heap',
];

function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['-r', join(process.cwd(), 'scripts/ts-register.cjs'), 'bench/run.ts', ...args],
      { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('npm run bench', () => {
  it('the README benchmark section is the one rendered from bench/results/latest.json', () => {
    const run = JSON.parse(readFileSync('bench/results/latest.json', 'utf8')) as BenchRun;
    expect(run.profile).toBe('full');
    expect(run.suites.map((s) => s.id)).toEqual(SUITES);
    expect(readmeBlock(readFileSync('README.md', 'utf8'))).toBe(renderReadmeBlock(run));
    for (const chart of run.suites.flatMap((s) => s.charts)) {
      expect(existsSync(`bench/results/charts/${chart.id}.svg`)).toBe(true);
    }
    // The full profile reaches the sizes the issue sets targets for.
    const ids = run.suites.flatMap((s) => s.targets.map((t) => t.id));
    expect(ids).toEqual(expect.arrayContaining(SCALE_TARGETS));
  });

  it('runs every suite (smoke profile) and writes JSON, markdown and SVG charts', async () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
    const readmeBefore = readFileSync('README.md', 'utf8');
    try {
      const { code, output } = await runBench(['--profile', 'smoke', '--out', out, '--no-readme']);
      expect({ code, tail: output.slice(-2_000) }).toMatchObject({ code: 0 });
      const run = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as BenchRun;
      expect(run.profile).toBe('smoke');
      expect(run.suites.map((s) => s.id)).toEqual(SUITES);
      for (const suite of run.suites) {
        expect(suite.tables.length).toBeGreaterThan(0);
        for (const table of suite.tables) {
          expect(table.rows.length).toBeGreaterThan(0);
          for (const row of table.rows) expect(row).toHaveLength(table.columns.length);
        }
      }
      expectScaleFigures(run.suites.find((s) => s.id === 'scale')!);
      expectSqlContendedFigures(run.suites.find((s) => s.id === 'sql-contended')!);
      const semaphore = run.suites.find((s) => s.id === 'semaphore')!;
      expectSharingFigures(semaphore, 4);
      // Both loads, for both locks: the target's (a think of half the 5 ms hold) and back to back.
      const loads = (semaphore.data as { runs: SharingResult[][] }).runs
        .flat()
        .map((r) => `${r.contender.kind} think ${r.thinkMs}`);
      expect([...new Set(loads)].sort()).toEqual([
        'ours think 0',
        'ours think 2.5',
        'redis-semaphore think 0',
        'redis-semaphore think 2.5',
      ]);
      expectSharingFigures(
        run.suites.find((s) => s.id === 'read-write')!,
        Infinity,
      );
      // Every target the issues set is checked in every run, with a finite measurement (the
      // scale suite's only where the profile reaches their sizes: not in smoke).
      const targets = run.suites.flatMap((s) => s.targets);
      expect(targets.map((t) => t.id).sort()).toEqual(
        [
          'decorator-overhead',
          'read-write-shared-vs-exclusive',
          'redis-contended-ideal',
          'redis-contended-max-wait',
          'redis-contended-vs-redlock',
          'redis-contended-vs-redlock-universal',
          'redis-contended-vs-semaphore',
          'redis-cycle-floor',
          'redis-cycle-node-redis',
          'redis-cycle-redlock',
          'redis-cycle-redlock-universal',
          'redis-cycle-semaphore',
          'semaphore-max-holders',
          'semaphore-vs-redis-semaphore',
          'zookeeper-contended-vs-recipe',
          'zookeeper-cycle-floor',
        ].sort(),
      );
      // Named, so a failure says whose figure it was.
      for (const t of targets) expect([t.id, Number.isFinite(t.measured)]).toEqual([t.id, true]);
      const report = readFileSync(join(out, 'latest.md'), 'utf8');
      for (const suite of run.suites) expect(report).toContain(`## ${suite.title}`);
      const charts = readdirSync(join(out, 'charts'));
      expect(charts.sort()).toEqual(
        run.suites.flatMap((s) => s.charts.map((c) => `${c.id}.svg`)).sort(),
      );
      for (const chart of charts) {
        const svg = readFileSync(join(out, 'charts', chart), 'utf8');
        expect(svg.startsWith('<svg')).toBe(true);
        expect(svg).toContain('role="graphics-symbol"'); // vega's bar marks
      }
      expect(readFileSync('README.md', 'utf8')).toBe(readmeBefore); // --no-readme
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 300_000);
});

/**
 * The scale suite's figures are well formed in the smoke profile's tiny version (1k held locks,
 * 10 waiters, 1k keys): every store and size measured, counts whole, nothing lost, the footprint
 * counted. Not timings: those mean nothing in smoke.
 */
function expectScaleFigures(suite: SuiteResult): void {
  const { held, waiters, keys } = suite.data as {
    held: HeldResult[];
    waiters: WaitersResult[];
    keys: DistinctKeysResult[];
  };
  expect(held.map((r) => [r.store, r.n])).toEqual([
    ['memory', 1_000],
    ['redis', 1_000],
    ['postgres', 1_000],
  ]);
  for (const r of held) {
    expect(r.lost).toBe(0);
    expect(r.notAcquired).toBe(0);
    expect(r.cpuPercent).toBeGreaterThan(0);
    expect(Number.isFinite(r.heapPerLockBytes)).toBe(true);
    // Memory has no store to call; Redis and PostgreSQL renew each lock about every second.
    if (r.store === 'memory') expect(r.storeCallsPerSec).toBeNull();
    else expect(r.storeCallsPerSec).toBeGreaterThan(0);
    if (r.store === 'redis') expect(r.redisCommandsPerSec).toBeGreaterThan(0);
    else expect(r.redisCommandsPerSec).toBeNull();
  }
  expect(waiters.map((r) => [r.store, r.waiters])).toEqual([
    ['memory', 10],
    ['redis', 10],
    ['zookeeper', 10],
  ]);
  for (const r of waiters) {
    expect(r.sections).toBeGreaterThan(0);
    expect(r.waitMs.n).toBe(r.sections);
    expect(r.waitMs.p99).toBeLessThanOrEqual(r.waitMs.max);
    expect(r.minPerWaiter).toBeLessThanOrEqual(r.maxPerWaiter);
    expect(r.jain).toBeGreaterThan(0);
    expect(r.jain).toBeLessThanOrEqual(1 + 1e-9);
  }
  expect(keys.map((r) => [r.store, r.n])).toEqual([
    ['redis', 1_000],
    ['postgres', 1_000],
    ['zookeeper', 1_000],
  ]);
  for (const r of keys) {
    for (const count of [r.before, r.after, r.settled]) {
      expect(Number.isInteger(count) && count >= 0).toBe(true);
    }
    expect(r.cyclesPerSec).toBeGreaterThan(0);
    // Only fence counters stay behind (one per bucket used, at most 4,096, and the layout's
    // record), nothing per key; on Redis and PostgreSQL the counters are there to be counted.
    expect(r.settled).toBeLessThanOrEqual(Math.min(r.n, 4_096) + 1);
    if (r.store !== 'zookeeper') expect(r.settled).toBeGreaterThan(0);
  }
  expect(suite.charts.every((c) => c.growth && c.points.length > 0)).toBe(true);
}

/**
 * The contended SQL suite's figures are well formed in smoke: every lock handed the key over
 * between processes and counted its statements; the pinned-connections runs were seen by
 * PostgreSQL (some connections, never more than the pool of 4, no more in use than open) and
 * granted the key. Not timings.
 */
function expectSqlContendedFigures(suite: SuiteResult): void {
  const { runs, pinned } = suite.data as {
    runs: Record<string, ContendedResult[]>;
    pinned: Array<WaitersRun & { cap: number | null; peak: PgConnectionPeak }>;
  };
  expect(Object.keys(runs)).toEqual(Object.keys(SQL_CONTENDERS));
  for (const [contender, [run]] of Object.entries(runs)) {
    // Named, so a failure says whose run it was; a section costs at least a take and a release.
    expect([
      contender,
      run.sections > 0,
      run.idleGapMs.n > 0,
      (run.statementsPerSection ?? 0) >= 2,
    ]).toEqual([contender, true, true, true]);
  }
  expect(pinned.map((r) => r.cap ?? 'default')).toEqual(['default', 0]);
  for (const r of pinned) {
    expect(r.waiters).toBe(32);
    expect(r.processes).toBe(1);
    expect(r.sections).toBeGreaterThan(0);
    expect(r.peak.samples).toBeGreaterThan(0);
    expect(r.peak.connections).toBeGreaterThan(0);
    expect(r.peak.connections).toBeLessThanOrEqual(4);
    expect(r.peak.inUse).toBeLessThanOrEqual(r.peak.connections);
    expect(r.peak.waitingInDatabase).toBeLessThanOrEqual(r.peak.inUse);
  }
}

/**
 * The sharing suites' figures are well formed in smoke: ours ran on Redis (the suites' default
 * store) among others, every run granted sections (ours to every worker), never more holders at once
 * than `limit` (the counted lock's permits; shared reads have none), a mutex never two, and no
 * write was granted beside another holder. Not timings.
 */
function expectSharingFigures(suite: SuiteResult, limit: number): void {
  const { runs } = suite.data as { runs: SharingResult[][] };
  const all = runs.flat();
  expect(all.some((r) => r.contender.kind === 'ours' && r.contender.store === 'redis')).toBe(true);
  for (const run of all) {
    const label = JSON.stringify(run.contender);
    // Every worker of ours got the key (its waiters queue FIFO); the peer's may starve one.
    const served = run.contender.kind === 'ours' ? run.minPerWorker > 0 : true;
    expect([label, run.sections > 0, served]).toEqual([label, true, true]);
    expect(run.maxHolders).toBeGreaterThan(0);
    expect(run.maxHolders).toBeLessThanOrEqual(limit);
    const { contender } = run;
    if (contender.kind === 'ours' && contender.permits === 1) {
      expect(run.writerOverlaps).toBe(0);
      if (!contender.sharedReads) expect(run.maxHolders).toBe(1);
    }
  }
}
