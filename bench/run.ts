/**
 * `npm run bench [-- --profile quick|full|smoke] [--only id,id [--merge]] [--out dir]
 * [--no-readme] [--render] [--sharing-store redis|memory]`: runs the suites side by side with their peers, prints the tables,
 * writes `<out>/latest.json` + `latest.md` + `charts/*.svg` (out = bench/results) and
 * regenerates the README's benchmark section. `--only` writes `partial.*` and `partial-charts/`
 * instead and leaves the README alone, unless `--merge`: then the suites measured replace
 * theirs in `latest.json` (same profile only), each marked with its own date, and everything
 * is re-rendered as for a whole run. `--render` re-renders everything from `latest.json`
 * without measuring. `--sharing-store memory` runs our counted and shared locks of the sharing
 * suites on memory instead of Redis (a build whose Redis backend cannot grant them yet), and
 * writes `partial.*` only.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { machineLine } from '../servers/machine';
import { PROFILES, type Profile, type SuiteOptions } from './harness/profile';
import type { BenchRun, SuiteResult } from './harness/result';
import { redisVersion } from './harness/redis-client';
import { renderChart } from './report/charts';
import { markdownTable, renderReport, targetsTable } from './report/markdown';
import { renderReadmeBlock, replaceReadmeBlock } from './report/readme';
import { databasesSuite } from './suites/databases';
import { decoratorSuite } from './suites/decorator';
import { redisContendedSuite } from './suites/redis-contended';
import { readWriteSuite } from './suites/read-write';
import { redisCycleSuite } from './suites/redis-cycle';
import { sampleAppSuite } from './suites/sample-app';
import { scaleSuite } from './suites/scale';
import { semaphoreSuite } from './suites/semaphore';
import { sqlContendedSuite } from './suites/sql-contended';
import { zookeeperSuite } from './suites/zookeeper';

const SUITES: Record<string, (profile: Profile, options: SuiteOptions) => Promise<SuiteResult>> = {
  'redis-cycle': redisCycleSuite,
  'redis-contended': redisContendedSuite,
  zookeeper: zookeeperSuite,
  databases: databasesSuite,
  'sql-contended': sqlContendedSuite,
  decorator: decoratorSuite,
  'sample-app': sampleAppSuite,
  scale: scaleSuite,
  semaphore: semaphoreSuite,
  'read-write': readWriteSuite,
};

interface Args {
  profile: Profile;
  only?: string[];
  out: string;
  readme: boolean;
  render: boolean;
  merge: boolean;
  suiteOptions: SuiteOptions;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    profile: PROFILES.quick,
    out: join(process.cwd(), 'bench/results'),
    readme: true,
    render: false,
    merge: false,
    suiteOptions: { sharingStore: 'redis' },
  };
  for (let i = 0; i < argv.length; i++) {
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${argv[i - 1]} needs a value`);
      return v;
    };
    switch (argv[i]) {
      case '--profile': {
        const name = value();
        if (!(name in PROFILES))
          throw new Error(`unknown profile "${name}" (${Object.keys(PROFILES).join(', ')})`);
        args.profile = PROFILES[name as Profile['name']];
        break;
      }
      case '--only':
        args.only = value().split(',');
        for (const id of args.only) {
          if (!(id in SUITES))
            throw new Error(`unknown suite "${id}" (${Object.keys(SUITES).join(', ')})`);
        }
        break;
      case '--out':
        args.out = value();
        break;
      case '--no-readme':
        args.readme = false;
        break;
      case '--render':
        args.render = true;
        break;
      case '--merge':
        args.merge = true;
        break;
      case '--sharing-store': {
        const store = value();
        if (store !== 'redis' && store !== 'memory')
          throw new Error(`--sharing-store is redis or memory, not "${store}"`);
        args.suiteOptions = { sharingStore: store };
        break;
      }
      default:
        throw new Error(`unknown argument "${argv[i]}"`);
    }
  }
  if (args.merge && !args.only) throw new Error('--merge needs --only');
  // A memory stand-in is never what the README reports: such a run writes partial.* only.
  if (args.merge && args.suiteOptions.sharingStore === 'memory')
    throw new Error('--merge cannot take a --sharing-store memory run');
  return args;
}

async function measure(args: Args): Promise<BenchRun> {
  const startedAt = new Date().toISOString();
  const started = performance.now();
  const suites: SuiteResult[] = [];
  for (const [id, suite] of Object.entries(SUITES)) {
    if (args.only && !args.only.includes(id)) continue;
    console.log(`\n▶ ${id} (${args.profile.name})`);
    const result = await suite(args.profile, args.suiteOptions);
    suites.push(result);
    for (const table of result.tables) console.log(`\n${table.title}\n${markdownTable(table)}`);
    console.log(`  ${id}: ${result.seconds.toFixed(1)} s`);
  }
  return {
    profile: args.profile.name,
    startedAt,
    machine: machineLine(),
    servers: { Redis: await redisVersion(), ZooKeeper: '3.8 (Debian package)' },
    seconds: (performance.now() - started) / 1000,
    suites,
  };
}

async function write(run: BenchRun, args: Args, name: string): Promise<void> {
  // A partial run's charts go beside, never over, those the latest full report shows.
  const charts = name === 'latest' ? 'charts' : `${name}-charts`;
  mkdirSync(join(args.out, charts), { recursive: true });
  writeFileSync(join(args.out, `${name}.json`), JSON.stringify(run, null, 2) + '\n');
  writeFileSync(join(args.out, `${name}.md`), renderReport(run, charts));
  for (const chart of run.suites.flatMap((s) => s.charts)) {
    writeFileSync(join(args.out, charts, `${chart.id}.svg`), await renderChart(chart));
  }
  if (args.readme && name === 'latest') {
    const path = join(process.cwd(), 'README.md');
    writeFileSync(path, replaceReadmeBlock(readFileSync(path, 'utf8'), renderReadmeBlock(run)));
    console.log('README.md benchmark section regenerated');
  }
  console.log(`wrote ${join(args.out, `${name}.json`)}, ${name}.md and ${charts}/`);
}

function readLatest(args: Args): BenchRun {
  return JSON.parse(readFileSync(join(args.out, 'latest.json'), 'utf8')) as BenchRun;
}

/**
 * `latest` with the suites of `partial` in place of its own (or added, in the runner's order),
 * each carrying the date it was measured: a suite rerun alone, without the long full profile of
 * every other.
 */
function merge(latest: BenchRun, partial: BenchRun): BenchRun {
  if (latest.profile !== partial.profile) {
    throw new Error(
      `--merge: latest.json is profile ${latest.profile}, this run ${partial.profile}`,
    );
  }
  const fresh = new Map(
    partial.suites.map((s) => [s.id, { ...s, measuredAt: partial.startedAt }] as const),
  );
  const replaced = latest.suites.filter((s) => fresh.has(s.id));
  const suites = Object.keys(SUITES).flatMap((id) => {
    const suite = fresh.get(id) ?? latest.suites.find((s) => s.id === id);
    return suite ? [suite] : [];
  });
  const seconds =
    latest.seconds -
    replaced.reduce((sum, s) => sum + s.seconds, 0) +
    partial.suites.reduce((sum, s) => sum + s.seconds, 0);
  return { ...latest, seconds, suites };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.render) {
    await write(readLatest(args), args, 'latest');
    return;
  }
  const run = await measure(args);
  console.log(`\n${markdownTable(targetsTable(run))}`);
  if (args.merge) await write(merge(readLatest(args), run), args, 'latest');
  else {
    const partial = args.only || args.suiteOptions.sharingStore === 'memory';
    await write(run, args, partial ? 'partial' : 'latest');
  }
  console.log(`bench: ${run.seconds.toFixed(0)} s`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
