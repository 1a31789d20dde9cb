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
import type { BenchRun } from '../../bench/harness/result';
import { readmeBlock, renderReadmeBlock } from '../../bench/report/readme';

const SUITES = [
  'redis-cycle',
  'redis-contended',
  'zookeeper',
  'databases',
  'decorator',
  'sample-app',
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
      // Every target the issue sets is checked in every run, with a finite measurement.
      const targets = run.suites.flatMap((s) => s.targets);
      expect(targets.map((t) => t.id).sort()).toEqual(
        [
          'decorator-overhead',
          'redis-contended-ideal',
          'redis-contended-max-wait',
          'redis-contended-vs-redlock',
          'redis-contended-vs-semaphore',
          'redis-cycle-floor',
          'redis-cycle-redlock',
          'redis-cycle-semaphore',
        ].sort(),
      );
      for (const t of targets) expect(Number.isFinite(t.measured)).toBe(true);
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
  }, 240_000);
});
