/**
 * `npm run test:chaos` runs the full chaos matrix, prints it, writes `docs/chaos-matrix.md` and
 * `.json`, and regenerates the README's reliability section from it.
 * `-- --profile ci` runs the reduced profile `npm test` runs; `--backend <id>` and
 * `--fault <id>` (substrings) run part of it; `--repeat <n>` runs every cell n times;
 * `--render` rewrites the report and the README from `docs/chaos-matrix.json` alone. Partial and CI runs write `.tmp/chaos-matrix-*.md`
 * only, so the committed report always is of full-profile runs; `--merge` with a partial
 * full-profile run (new rows, say) puts its cells into `docs/chaos-matrix.json` in place of the
 * same (backend, fault) cells, keeping the rest, and regenerates the report and README.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { stopAll } from '../../servers/redis-servers';
import { stopAllZk } from '../../servers/zk-servers';
import { PROFILES, runMatrix, type ChaosProfile, type MatrixRun } from './matrix';
import { consoleLine, markdownReport, readmeBlock, summaryTable, withReadmeBlock } from './report';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Writes the report, its JSON and the README block of a full run. */
function writeFullReport(run: MatrixRun): void {
  mkdirSync('docs', { recursive: true });
  writeFileSync('docs/chaos-matrix.md', markdownReport(run));
  writeFileSync('docs/chaos-matrix.json', `${JSON.stringify(run, null, 2)}\n`);
  writeFileSync('README.md', withReadmeBlock(readFileSync('README.md', 'utf8'), readmeBlock(run)));
  console.log('wrote docs/chaos-matrix.md, docs/chaos-matrix.json and the README section');
}

/**
 * `base` with `part`'s cells in place of base's cells of the same (backend, fault), and its
 * skipped cells likewise; backends and faults `part` adds are placed as in `part`.
 */
function mergeRuns(base: MatrixRun, part: MatrixRun): MatrixRun {
  const pairs = new Set(
    [...part.cells, ...part.skipped].map((c) => `${c.backend}\u0000${c.fault}`),
  );
  const kept = <T extends { backend: string; fault: string }>(list: readonly T[]): T[] =>
    list.filter((c) => !pairs.has(`${c.backend}\u0000${c.fault}`));
  // An item `part` adds goes right after the one it follows in `part` (a variant row next to
  // the row it varies), or last when it follows none of base's.
  const union = <T extends { id: string }>(a: readonly T[], b: readonly T[]): T[] => {
    const out = [...a];
    b.forEach((x, i) => {
      if (out.some((y) => y.id === x.id)) return;
      const after = i > 0 ? out.findIndex((y) => y.id === b[i - 1].id) : -1;
      if (after >= 0) out.splice(after + 1, 0, x);
      else out.push(x);
    });
    return out;
  };
  return {
    ...base,
    backends: union(base.backends, part.backends),
    faults: union(base.faults, part.faults),
    cells: [...kept(base.cells), ...part.cells],
    skipped: [...kept(base.skipped), ...part.skipped],
    date: part.date,
  };
}

async function main(): Promise<void> {
  if (process.argv.includes('--render')) {
    // Re-render the report and the README from the last full run, without running anything.
    return writeFullReport(JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')) as MatrixRun);
  }
  const name = (flag('profile') ?? 'full') as ChaosProfile['name'];
  if (!PROFILES[name]) throw new Error(`unknown profile "${name}": use ci or full`);
  const repeat = Number(flag('repeat') ?? PROFILES[name].repeat);
  if (!Number.isInteger(repeat) || repeat < 1)
    throw new Error(`--repeat must be a positive integer`);
  const profile = { ...PROFILES[name], repeat };
  const only = { backend: flag('backend'), fault: flag('fault') };
  const partial = only.backend !== undefined || only.fault !== undefined;
  console.log(`chaos matrix, profile ${name}${partial ? ` (only ${JSON.stringify(only)})` : ''}`);
  const run = await runMatrix(profile, { only, onCell: (c) => console.log(consoleLine(c)) });
  for (const s of run.skipped.filter((s) => s.reason.startsWith('skipped'))) {
    console.log(`skipped ${s.fault} × ${s.backend}: ${s.reason}`);
  }
  console.log(`\n${summaryTable(run)}\n`);

  if (name === 'full' && !partial) {
    writeFullReport(run);
  } else if (name === 'full' && process.argv.includes('--merge')) {
    writeFullReport(mergeRuns(JSON.parse(readFileSync('docs/chaos-matrix.json', 'utf8')), run));
  } else {
    mkdirSync('.tmp', { recursive: true });
    writeFileSync(`.tmp/chaos-matrix-${name}.md`, markdownReport(run));
    console.log(`wrote .tmp/chaos-matrix-${name}.md`);
  }
  const failed = run.cells.filter((c) => c.verdict === 'FAIL');
  console.log(`${run.cells.length} cells, ${failed.length} failed`);
  if (failed.length > 0) process.exitCode = 1;
}

main()
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopAll();
    await stopAllZk();
  });
