// Runs one cell of the compatibility matrix: a fresh app in a temp folder installs the packed
// tarball with plain `npm install` on the cell's Node and NestJS, compiles the battery's app
// (test/compat/app) against what it installed, and drives two processes of it (one on Express,
// one on Fastify) over HTTP against the machine's Redis, or against three redis-server nodes
// for a Redlock cell. Returns what it observed; the spec judges it. Never throws: a failed step
// is recorded and the steps after it are skipped.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Redis } from 'ioredis';
import { redisLockNames } from '../support/redis-names';
import { sleep } from '../../servers/child-processes';
import { dropTable } from '../../servers/databases';
import { CommandError, readJson, REPO_ROOT, runCommand } from '../support/packed-package';
import type { Section } from './app/section';
import {
  cellName,
  NEST_STACKS,
  NODE_RELEASES,
  type Cell,
  type LockWiring,
  type RedisClientPackage,
} from './cells';
import { nodeBinary } from './node-runtime';

const APP_SOURCES = path.join(REPO_ROOT, 'test', 'compat', 'app');
const TSC = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** The lock ttl the app gets through ConfigService (a string in the environment). */
export const CELL_TTL_MS = 6_000;
/** The app's shutdown.timeout: in-flight work gets this long, then its lock is aborted. */
export const CELL_SHUTDOWN_TIMEOUT_MS = 1_000;
/** Concurrent @Locked (and unlocked) sections each process is asked for. */
export const SECTIONS_PER_PROCESS = 15;
/** Every Redis client package an app could lock through; a cell's app has exactly one. */
export const REDIS_CLIENT_PACKAGES: readonly RedisClientPackage[] = [
  'ioredis',
  'redis',
  'iovalkey',
];

/** An HTTP answer. */
export interface Answer {
  status: number;
  body: unknown;
}

/** How an app process ended. */
export interface Exit {
  code: number | null;
  signal: string | null;
  /** ms from SIGTERM to exit. */
  afterTermMs: number;
}

/** Everything one cell observed; a field is missing when its step did not run. */
export interface CellReport {
  cell: Cell;
  /** The step that failed, with its error (and app output); the later steps did not run. */
  failure?: { step: string; message: string };
  /** ms per step. */
  timings: Record<string, number>;
  /** `node --version` of the cell's Node. */
  nodeVersion?: string;
  /** Versions the app ended up with, read from its node_modules. */
  installed?: Record<string, string>;
  /** Output of the user's `npm install <tarball> ioredis`, and of the later plain `npm install`. */
  installOutput?: string;
  /** Problems `npm ls --all` reports (invalid or missing peers): empty when clean. */
  npmLsProblems?: string[];
  /** Every installed `name@version` of the app's tree (`npm ls --all`), nested ones included. */
  tree?: string[];
  /** Whether TypeScript emitted dist/main.js as CommonJS or as an ES module. */
  compiledAs?: 'commonjs' | 'esm';
  locked?: { sections: Section[]; final: number };
  unlocked?: { sections: Section[]; final: number };
  /** The two processes' pids: [express, fastify]. */
  pids?: [number, number];
  /** The wiring each process reported it booted with: [express, fastify]. */
  wirings?: [string, string];
  busy?: {
    holder: Answer;
    expressWhileHeld: Answer;
    fastifyWhileHeld: Answer;
    /**
     * PTTL of the held lock's key on each store node (-2: absent there): proves prefix and ttl
     * came from ConfigService.
     */
    pttls: number[];
  };
  health?: { express: Answer; fastify: Answer };
  /** Lines `<tick> <pid>` of the locked job's runs, and of the unlocked job that every replica fires. */
  cron?: { ran: string[]; fired: string[] };
  shutdown?: {
    /** On how many store nodes each lock's key exists, before SIGTERM and after both exits. */
    heldBefore: { route: number; bare: number };
    heldAfter: { route: number; bare: number };
    routeAnswer?: Answer;
    express: Exit;
    fastify: Exit;
  };
  sql?: { strategy: string; refusedWhileHeld: boolean; fences: (number | null)[] }[];
}

/** What every cell shares: the tarball to install, where temp apps go, and the stores. */
export interface CellContext {
  tarball: string;
  tmp: string;
  redisUrl: string;
  /** Independent redis-server nodes for the Redlock cells (started for the run). */
  redlockUrls: readonly string[];
}

/** The store nodes a cell's locks live on: one Redis, or every node of its Redlock. */
function storeUrls(cell: Cell, ctx: Pick<CellContext, 'redisUrl' | 'redlockUrls'>) {
  return cell.redis.wiring.includes('redlock') ? [...ctx.redlockUrls] : [ctx.redisUrl];
}

/** How many of `n` store nodes make a lock held: a majority (the one node of a single Redis). */
export function quorumOf(n: number): number {
  return Math.floor(n / 2) + 1;
}

interface AppProcess {
  child: ChildProcess;
  url: string;
  /** The LOCK_WIRING its root module was picked by, as the app printed it. */
  wiring: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: string | null; at: number }>;
}

async function http(method: 'GET' | 'POST', url: string): Promise<Answer> {
  const res = await fetch(url, { method });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body };
}

/** Polls `check` every 25 ms until it holds, for at most `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(25);
  }
}

/** Runs every step of `cell`; see the file comment. */
export async function runCell(cell: Cell, ctx: CellContext): Promise<CellReport> {
  const report: CellReport = { cell, timings: {} };
  const name = cellName(cell);
  const appDir = path.join(ctx.tmp, name);
  const witnessDir = path.join(appDir, 'witness');
  const prefix = `compat-${name}-${process.pid}-${Date.now()}:`;
  const sqlTable = `compat_${name.replace(/\W/g, '_')}_${process.pid}`;
  const stack = NEST_STACKS[cell.nest];
  const apps: AppProcess[] = [];
  const { client, version: clientVersion, installed: clientInstalled, wiring } = cell.redis;
  const stores = storeUrls(cell, ctx).map(
    (url) => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 }),
  );
  /** On how many store nodes `key` exists. */
  const holders = async (key: string) =>
    (await Promise.all(stores.map((store) => store.exists(key)))).filter((n) => n === 1).length;
  const quorum = quorumOf(stores.length);
  let current = 'start';

  const step = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
    current = label;
    const start = performance.now();
    try {
      return await fn();
    } finally {
      report.timings[label] = Math.round(performance.now() - start);
    }
  };

  try {
    const node = await step('node', () => nodeBinary(NODE_RELEASES[cell.node]));
    // npm is a Node script: with the cell's Node first on PATH, the install runs (and checks
    // `engines`) on that Node, as it would on the user's machine.
    const env = { PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}` };
    const inApp = (cmd: string, args: string[], timeoutMs: number) =>
      runCommand(cmd, args, { cwd: appDir, timeoutMs, env });
    fs.mkdirSync(witnessDir, { recursive: true });
    report.nodeVersion = (await inApp(node, ['--version'], 30_000)).stdout.trim();

    const sql: Record<string, string> = cell.sql && stack.sql ? { ...stack.sql } : {};
    if (cell.sqliteDriver) {
      sql[cell.sqliteDriver.alias] = `npm:better-sqlite3@${cell.sqliteDriver.version}`;
    }
    // An app already on its Redis client has it in package.json before the library comes;
    // otherwise the user names it with the library, as the README's install command does.
    const appClient = clientInstalled === 'app' ? { [client]: clientVersion } : {};
    const userClient = clientInstalled === 'with-package' ? [`${client}@${clientVersion}`] : [];
    fs.writeFileSync(
      path.join(appDir, 'package.json'),
      JSON.stringify(
        {
          name: `compat-${name}`,
          version: '0.0.0',
          private: true,
          ...(cell.module === 'esm' ? { type: 'module' } : {}),
          dependencies: { ...stack.app, ...sql, ...appClient },
        },
        null,
        2,
      ),
    );
    const npm = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=warn'];
    // The app as its team has it, then the user's own command, then any later install.
    await step('install app', () => inApp('npm', ['install', ...npm], 300_000));
    const added = await step('install package', () =>
      inApp('npm', ['install', ctx.tarball, ...userClient, ...npm], 300_000),
    );
    const again = await step('install again', () => inApp('npm', ['install', ...npm], 300_000));
    report.installOutput = [added.stdout, added.stderr, again.stdout, again.stderr].join('\n');
    const ls = await step('npm ls', () => npmLs(appDir, env));
    report.npmLsProblems = ls.problems;
    report.tree = ls.tree;
    report.installed = installedVersions(appDir, [
      'nestjs-distributed-lock',
      ...Object.keys(stack.app),
      ...Object.keys(sql),
      ...REDIS_CLIENT_PACKAGES,
      'redlock',
      'express',
      'fastify',
    ]);

    await step('compile', () => compileApp(cell, appDir, node, env));
    report.compiledAs = emittedModuleKind(path.join(appDir, 'dist', 'main.js'));

    await Promise.all(stores.map((store) => store.connect()));
    const appEnv = {
      ...env,
      REDIS_URL: ctx.redisUrl,
      REDLOCK_URLS: ctx.redlockUrls.join(','),
      LOCK_PREFIX: prefix,
      LOCK_TTL_MS: String(CELL_TTL_MS),
      SHUTDOWN_TIMEOUT_MS: String(CELL_SHUTDOWN_TIMEOUT_MS),
      WITNESS_DIR: witnessDir,
    };
    const wiredAs = (w: LockWiring) => ({ LOCK_WIRING: w });
    const [express, fastify] = await step('boot', () =>
      Promise.all([
        startApp(node, appDir, {
          ...appEnv,
          ...wiredAs(wiring[0]),
          PLATFORM: 'express',
          SHUTDOWN: cell.focus === 'nest' ? 'hooks' : 'close',
        }),
        startApp(node, appDir, {
          ...appEnv,
          ...wiredAs(wiring[1]),
          PLATFORM: 'fastify',
          SHUTDOWN: 'close',
        }),
      ]),
    );
    apps.push(express, fastify);
    report.pids = [express.child.pid ?? -1, fastify.child.pid ?? -1];
    report.wirings = [express.wiring, fastify.wiring];
    const bootedAt = Date.now();

    const burst = async (kind: 'locked' | 'unlocked', counter: string) => {
      const calls = [express, fastify].flatMap((app) =>
        Array.from({ length: SECTIONS_PER_PROCESS }, () =>
          http('POST', `${app.url}/counter/${counter}/${kind}`),
        ),
      );
      const answers = await Promise.all(calls);
      const bad = answers.find((a) => a.status !== 201);
      if (bad) throw new Error(`POST /counter/${counter}/${kind}: ${JSON.stringify(bad)}`);
      const final = Number(fs.readFileSync(path.join(witnessDir, `counter-${counter}`), 'utf8'));
      return { sections: answers.map((a) => a.body as Section), final };
    };
    report.locked = await step('locked', () => burst('locked', 'a'));
    report.unlocked = await step('unlocked', () => burst('unlocked', 'b'));

    report.busy = await step('busy', async () => {
      // Held for 3 s: time to see it held and to be refused twice, on a busy machine too.
      const holder = http('POST', `${express.url}/hold/busy?ms=3000`);
      const lockedNow = async () =>
        ((await http('GET', `${fastify.url}/locked/hold:busy`)).body as { locked?: boolean })
          .locked === true;
      await until(lockedNow, 5_000, 'hold:busy held');
      const busyKey = redisLockNames(prefix, 'hold:busy').lock;
      const pttls = await Promise.all(stores.map((store) => store.pttl(busyKey)));
      const expressWhileHeld = await http('POST', `${express.url}/hold/busy?ms=0`);
      const fastifyWhileHeld = await http('POST', `${fastify.url}/hold/busy?ms=0`);
      return { holder: await holder, expressWhileHeld, fastifyWhileHeld, pttls };
    });

    report.health = await step('health', async () => ({
      express: await http('GET', `${express.url}/health`),
      fastify: await http('GET', `${fastify.url}/health`),
    }));

    if (cell.focus === 'nest') {
      report.cron = await step('cron', async () => {
        // Ticks every 3 s in both processes; wait for 4 ticks both fired after the boot.
        const fired = () => readLines(path.join(witnessDir, 'log-fired'));
        await until(
          async () => completeTicks(fired(), report.pids!).length >= 4,
          Math.max(0, 20_000 - (Date.now() - bootedAt)) + 6_000,
          'four cron ticks fired in both processes',
        );
        await sleep(300); // the locked run of the last tick writes its line by now
        return { ran: readLines(path.join(witnessDir, 'log-ran')), fired: fired() };
      });
    }

    report.shutdown = await step('shutdown', async () => {
      const routeKey = redisLockNames(prefix, 'hold:down').lock;
      const bareKey = redisLockNames(prefix, 'bare:down').lock;
      const route = http('POST', `${express.url}/hold/down?ms=60000`).catch(
        (err: Error): Answer => ({ status: 0, body: err.message }),
      );
      const bare = await http('POST', `${fastify.url}/bare/down`);
      if (bare.status !== 201) throw new Error(`POST /bare/down: ${JSON.stringify(bare)}`);
      await until(async () => (await holders(routeKey)) >= quorum, 5_000, 'hold:down held');
      const heldBefore = { route: await holders(routeKey), bare: await holders(bareKey) };
      const termAt = performance.now();
      const exits = apps.map(async (app) => {
        app.child.kill('SIGTERM');
        const killer = setTimeout(() => app.child.kill('SIGKILL'), 20_000);
        const exit = await app.exited;
        clearTimeout(killer);
        return { code: exit.code, signal: exit.signal, afterTermMs: Math.round(exit.at - termAt) };
      });
      const [expressExit, fastifyExit] = await Promise.all(exits);
      const heldAfter = { route: await holders(routeKey), bare: await holders(bareKey) };
      return {
        heldBefore,
        heldAfter,
        routeAnswer: await route,
        express: expressExit,
        fastify: fastifyExit,
      };
    });

    if (cell.sql) {
      report.sql = await step('typeorm', async () => {
        const { stdout } = await runCommand(node, [path.join('dist', 'sql-check.js')], {
          cwd: appDir,
          timeoutMs: 60_000,
          env: {
            ...env,
            SQL_TABLE: sqlTable,
            LOCK_PREFIX: prefix,
            WITNESS_DIR: witnessDir,
            SQLITE_DRIVER: cell.sqliteDriver?.alias,
          },
        });
        return JSON.parse(stdout.trim().split('\n').pop() ?? '') as CellReport['sql'];
      });
    }
  } catch (err) {
    const outputs = apps
      .map((app, i) => `--- app ${i} output:\n${app.output().slice(-4_000)}`)
      .join('\n');
    report.failure = {
      step: current,
      message: `${err instanceof Error ? err.message : String(err)}\n${outputs}`,
    };
  } finally {
    for (const app of apps) app.child.kill('SIGKILL');
    for (const store of stores) store.disconnect();
    if (cell.sql) await dropTable('postgres', sqlTable).catch(() => undefined);
  }
  return report;
}

/** The ticks every given pid fired in, except the newest one (its runs may still be going). */
export function completeTicks(fired: readonly string[], pids: readonly number[]): number[] {
  const byTick = new Map<number, Set<number>>();
  for (const line of fired) {
    const [tick, pid] = line.split(' ').map(Number);
    byTick.set(tick, (byTick.get(tick) ?? new Set()).add(pid));
  }
  const ticks = [...byTick.keys()].sort((a, b) => a - b);
  return ticks.slice(0, -1).filter((t) => pids.every((pid) => byTick.get(t)?.has(pid)));
}

/** What TypeScript emitted for `file`: ES module syntax or CommonJS `require` calls. */
function emittedModuleKind(file: string): 'commonjs' | 'esm' {
  const code = fs.readFileSync(file, 'utf8');
  if (/^import\s/m.test(code)) return 'esm';
  if (/\brequire\(/.test(code)) return 'commonjs';
  throw new Error(`${file} is neither an ES module nor CommonJS:\n${code.slice(0, 500)}`);
}

function readLines(file: string): string[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
}

function installedVersions(appDir: string, names: readonly string[]): Record<string, string> {
  const versions: Record<string, string> = {};
  for (const name of new Set(names)) {
    const file = path.join(appDir, 'node_modules', name, 'package.json');
    if (fs.existsSync(file)) versions[name] = readJson<{ version: string }>(file).version;
  }
  return versions;
}

/** A node of `npm ls --json`. */
interface LsNode {
  version?: string;
  dependencies?: Record<string, LsNode>;
  problems?: string[];
}

/**
 * What `npm ls --all` finds: the invalid or missing dependencies (peers included) it reports,
 * and every `name@version` of the tree. npm ls exits non-zero when it finds problems; a failure
 * that lists none is reported as a problem itself.
 */
async function npmLs(
  appDir: string,
  env: Record<string, string>,
): Promise<{ problems: string[]; tree: string[] }> {
  let stdout: string;
  let failure: string | undefined;
  try {
    ({ stdout } = await runCommand('npm', ['ls', '--all', '--json'], {
      cwd: appDir,
      timeoutMs: 120_000,
      env,
    }));
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    stdout = err.stdout;
    failure = `npm ls failed: ${err.message}`;
  }
  let root: LsNode | undefined;
  try {
    root = JSON.parse(stdout) as LsNode;
  } catch {
    // not JSON: reported below
  }
  const tree = new Set<string>();
  const walk = (deps: LsNode['dependencies']) => {
    for (const [name, dep] of Object.entries(deps ?? {})) {
      // An optional peer nobody installed is listed as `{}`: not part of the tree.
      if (dep.version !== undefined) tree.add(`${name}@${dep.version}`);
      walk(dep.dependencies);
    }
  };
  walk(root?.dependencies);
  const problems = root?.problems ?? [];
  if (failure && problems.length === 0) problems.push(failure);
  if (!failure && !root) problems.push('npm ls printed no JSON');
  return { problems, tree: [...tree].sort() };
}

/** Compiles the battery's app with TypeScript, strictly, against the app's own node_modules. */
async function compileApp(
  cell: Cell,
  appDir: string,
  node: string,
  env: Record<string, string>,
): Promise<void> {
  const src = path.join(appDir, 'src');
  fs.mkdirSync(src, { recursive: true });
  for (const file of fs.readdirSync(APP_SOURCES)) {
    if (file === 'sql-check.ts' && !cell.sql) continue;
    // own-client.<package>.ts: only the one for the app's own Redis client, as own-client.ts.
    const ownClient = /^own-client\.(.+)\.ts$/.exec(file)?.[1];
    if (ownClient !== undefined && ownClient !== cell.redis.client) continue;
    const target = ownClient === undefined ? file : 'own-client.ts';
    fs.copyFileSync(path.join(APP_SOURCES, file), path.join(src, target));
  }
  const module =
    cell.module === 'commonjs'
      ? { module: 'commonjs', moduleResolution: 'node10' }
      : { module: 'nodenext', moduleResolution: 'nodenext' };
  const tsconfig = {
    compilerOptions: {
      ...module,
      target: 'es2022',
      strict: true,
      // Every declaration file the app reaches, ours and NestJS's, is checked against this major.
      skipLibCheck: false,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
      rootDir: 'src',
      outDir: 'dist',
      // @types/node is a dev tool of every Nest app, not a peer of ours: borrowed from the repo.
      types: ['node'],
      typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
    },
    include: ['src'],
  };
  fs.writeFileSync(path.join(appDir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
  await runCommand(node, [TSC, '-p', 'tsconfig.json'], { cwd: appDir, timeoutMs: 180_000, env });
}

function startApp(node: string, appDir: string, env: Record<string, string>): Promise<AppProcess> {
  const child = spawn(node, [path.join('dist', 'main.js')], {
    cwd: appDir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal, at: performance.now() })),
  );
  const app: Omit<AppProcess, 'url' | 'wiring'> = { child, output: () => out, exited };
  return new Promise<AppProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${env.PLATFORM} app did not listen within 60 s:\n${out}`));
    }, 60_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const listening = /^\{"port":(\d+),"wiring":"(\w+)"\}$/m.exec(out);
      if (listening) {
        clearTimeout(timer);
        resolve({ ...app, url: `http://127.0.0.1:${listening[1]}`, wiring: listening[2] });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`${env.PLATFORM} app exited at startup (${JSON.stringify(exit)}):\n${out}`));
    });
  });
}
