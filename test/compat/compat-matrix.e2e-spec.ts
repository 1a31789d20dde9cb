/**
 * The compatibility matrix (test/compat/cells.ts): for each chosen NestJS major x Node line x
 * Redis client, a fresh app in a temp folder installs the `npm pack` tarball with plain
 * `npm install` and runs a battery against the machine's Redis, or three redis-server nodes
 * started here for the Redlock cells (and Postgres where the cell says so). Cells run side by
 * side: they share nothing but the servers, where each has its own key prefix and table.
 * A cell's steps run once in `beforeAll` (test/compat/cell-runner.ts); each `it` judges one part.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MACHINE_REDIS_URL, startRedisNodes, type RedisNode } from '../../servers/redis-servers';
import { packTarball, readJson, REPO_ROOT } from '../support/packed-package';
import {
  CELL_SHUTDOWN_TIMEOUT_MS,
  CELL_TTL_MS,
  completeTicks,
  quorumOf,
  REDIS_CLIENT_PACKAGES,
  runCell,
  SECTIONS_PER_PROCESS,
  type CellReport,
} from './cell-runner';
import type { Section } from './app/section';
import { CELLS, cellName, NEST_STACKS, NODE_RELEASES, wiringLabel, type Cell } from './cells';
import { readmeBlock, withReadmeBlock } from './readme-table';

/** Cells at once: installs wait on the registry, the battery on timers; compiles need a core. */
const SIDE_BY_SIDE = 3;

/** Nodes of the Redlock cells' quorum: odd, the smallest that survives a node down. */
const REDLOCK_NODES = 3;

const reports = new Map<string, CellReport>();
let tmp = '';
let redlockNodes: RedisNode[] = [];

/** Runs `work` over `items`, at most `limit` at a time. */
async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>) {
  const queue = [...items];
  const lanes = Array.from({ length: Math.min(limit, queue.length) }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
  });
  await Promise.all(lanes);
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-compat-'));
  const needsRedlock = CELLS.some((cell) => cell.redis.wiring.includes('redlock'));
  const [tarball, nodes] = await Promise.all([
    packTarball(tmp),
    needsRedlock ? startRedisNodes(REDLOCK_NODES) : [],
  ]);
  redlockNodes = nodes;
  const ctx = { tmp, redisUrl: MACHINE_REDIS_URL, redlockUrls: nodes.map((n) => n.url) };
  await pool(CELLS, SIDE_BY_SIDE, async (cell) => {
    reports.set(cellName(cell), await runCell(cell, { ...ctx, tarball: tarball.file }));
  });
}, 900_000);

afterAll(async () => {
  await Promise.all(redlockNodes.map((node) => node.stop()));
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  for (const report of reports.values()) {
    const steps = Object.entries(report.timings)
      .map(([step, ms]) => `${step} ${(ms / 1000).toFixed(1)}s`)
      .join(', ');
    process.stdout.write(`compat ${cellName(report.cell)}: ${steps}\n`);
  }
});

/** The cell's report, or its failed step as the error. */
function reportOf(cell: Cell): CellReport {
  const report = reports.get(cellName(cell));
  if (!report) throw new Error(`${cellName(cell)} did not run`);
  if (report.failure) {
    throw new Error(
      `${cellName(cell)}: step "${report.failure.step}" failed:\n${report.failure.message}`,
    );
  }
  return report;
}

/** Present after a successful run (reportOf threw otherwise). */
function must<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} missing from the report`);
  return value;
}

const title = (cell: Cell) =>
  `NestJS ${cell.nest} on Node ${cell.node} (${cell.module}${cell.sql ? ', TypeORM' : ''}; ` +
  `${cell.redis.client} ${cell.redis.version}: ${wiringLabel(cell).replace(/`/g, '')})`;

describe.each(CELLS.map((cell) => [title(cell), cell] as const))('%s', (_title, cell) => {
  const stack = NEST_STACKS[cell.nest];
  const { client, version: clientVersion } = cell.redis;
  /** Store nodes of the cell (one, or the Redlock's), and how many make a lock held. */
  const nodes = cell.redis.wiring.includes('redlock') ? REDLOCK_NODES : 1;
  const quorum = quorumOf(nodes);

  it('installs the tarball with plain npm install, and later installs still work', () => {
    const report = reportOf(cell);
    expect(report.nodeVersion).toBe(`v${NODE_RELEASES[cell.node]}`);
    const own = readJson<{ version: string }>(path.join(REPO_ROOT, 'package.json')).version;
    expect(report.installed).toMatchObject({
      'nestjs-distributed-lock': own,
      ...stack.app,
      ...(cell.sql ? stack.sql : {}),
      ...(cell.sqliteDriver ? { [cell.sqliteDriver.alias]: cell.sqliteDriver.version } : {}),
      [client]: clientVersion,
    });
    expect(report.installOutput).not.toMatch(/ERESOLVE|peer dep/i);
    // npm warns (one `{ ... }` block per package) when a package's engines exclude this Node.
    expect(report.installOutput).not.toMatch(/EBADENGINE[^}]*nestjs-distributed-lock/);
    // npm ls reports invalid or missing peers anywhere in the tree.
    expect(report.npmLsProblems).toEqual([]);
  });

  const onlyClient = `${client} ${clientVersion} is the only Redis client in the tree`;
  it(`${onlyClient}, and there is no redlock`, () => {
    // The one client package is what a `url` backend's default driver choice can land on.
    const tree = must(reportOf(cell).tree, 'tree');
    const name = (entry: string) => entry.slice(0, entry.lastIndexOf('@'));
    const clients = tree.filter((entry) =>
      (REDIS_CLIENT_PACKAGES as readonly string[]).includes(name(entry)),
    );
    expect(clients).toEqual([`${client}@${clientVersion}`]);
    expect(tree.filter((entry) => name(entry) === 'redlock')).toEqual([]);
    expect(reportOf(cell).installed).not.toHaveProperty('redlock');
  });

  it("compiles strictly (skipLibCheck off) against this major's own type declarations", () => {
    // The compile step fails the cell on any type error; this checks the module kind it emitted
    // (an ES-module cell without "type": "module" would silently be CommonJS).
    expect(reportOf(cell).compiledAs).toBe(cell.module === 'esm' ? 'esm' : 'commonjs');
  });

  it('@Locked serializes a read-modify-write across two processes (Express and Fastify)', () => {
    const report = reportOf(cell);
    const { sections, final } = must(report.locked, 'locked');
    // Each process booted the root module of its wiring (cells.ts LockWiring).
    expect(report.wirings).toEqual(cell.redis.wiring);
    expect(sections).toHaveLength(2 * SECTIONS_PER_PROCESS);
    expect(new Set(sections.map((s) => s.pid))).toEqual(new Set(report.pids));
    expect(final).toBe(2 * SECTIONS_PER_PROCESS);
    const ordered = [...sections].sort((a, b) => compareNs(a.start, b.start));
    const overlaps = ordered.filter((s, i) => i > 0 && compareNs(s.start, ordered[i - 1].end) < 0);
    expect(overlaps).toEqual([]);
    const fences = ordered.map((s) => s.fence);
    expect(fences.every((f, i) => typeof f === 'number' && (i === 0 || f > fences[i - 1]!))).toBe(
      true,
    );
  });

  it('the same section without the lock loses updates (the check above can fail)', () => {
    const { sections, final } = must(reportOf(cell).unlocked, 'unlocked');
    expect(sections).toHaveLength(2 * SECTIONS_PER_PROCESS);
    expect(final).toBeLessThan(2 * SECTIONS_PER_PROCESS);
  });

  it('a busy @Locked route answers 409 over Express and over Fastify', () => {
    const busy = must(reportOf(cell).busy, 'busy');
    expect(busy.holder).toMatchObject({ status: 201, body: { key: 'busy', aborted: false } });
    for (const answer of [busy.expressWhileHeld, busy.fastifyWhileHeld]) {
      expect(answer).toEqual({
        status: 409,
        body: {
          statusCode: 409,
          code: 'LOCK_NOT_ACQUIRED',
          message: 'The resource is locked by another operation; retry later.',
        },
      });
    }
  });

  it('forRootAsync with ConfigService: key prefix and ttl come from the environment', () => {
    // The held lock exists under the configured prefix (PTTL of a missing key is -2), on the
    // one Redis or on a quorum of the Redlock's nodes, with a lease of at most the configured
    // 6 s (the default would be 30 s); renewal every ttl/3 keeps it above 4 s, so half of it is
    // a safe floor on a busy machine. A node the grant missed has no key at all.
    const { pttls } = must(reportOf(cell).busy, 'busy');
    expect(pttls).toHaveLength(nodes);
    const leased = pttls.filter((ms) => ms > CELL_TTL_MS / 2 && ms <= CELL_TTL_MS);
    expect(leased.length).toBeGreaterThanOrEqual(quorum);
    expect(pttls.filter((ms) => !leased.includes(ms) && ms !== -2)).toEqual([]);
  });

  it('the terminus health check reports the lock backend up', () => {
    const health = must(reportOf(cell).health, 'health');
    for (const answer of [health.express, health.fastify]) {
      expect(answer).toMatchObject({
        status: 200,
        body: { status: 'ok', details: { 'lock:main': { status: 'up' } } },
      });
    }
  });

  if (cell.focus === 'nest') {
    it("@Cron + @Locked({ onBusy: 'skip' }) runs once per tick across both processes", () => {
      const report = reportOf(cell);
      const { ran, fired } = must(report.cron, 'cron');
      const pids = must(report.pids, 'pids');
      // Both schedulers fired these ticks (the unlocked twin job shows it) ...
      const ticks = completeTicks(fired, pids);
      expect(ticks.length).toBeGreaterThanOrEqual(3);
      // ... and the locked job ran exactly once in each of them, in one process or the other.
      const runsPerTick = ticks.map(
        (tick) => ran.filter((line) => line.startsWith(`${tick} `)).length,
      );
      expect(runsPerTick).toEqual(ticks.map(() => 1));
      expect(ran.every((line) => pids.includes(Number(line.split(' ')[1])))).toBe(true);
    });
  }

  const expressShutdown = cell.focus === 'nest' ? 'enableShutdownHooks' : 'app.close';
  const shutdowns = `${expressShutdown} (Express), app.close (Fastify)`;
  it(`graceful shutdown releases held locks: ${shutdowns}`, () => {
    const down = must(reportOf(cell).shutdown, 'shutdown');
    // Held on the one Redis or a quorum of nodes before; on no node after.
    expect(down.heldBefore.route).toBeGreaterThanOrEqual(quorum);
    expect(down.heldBefore.bare).toBeGreaterThanOrEqual(quorum);
    expect(down.heldAfter).toEqual({ route: 0, bare: 0 });
    // The running request was given shutdown.timeout, then its lock's signal aborted it.
    expect(down.routeAnswer).toMatchObject({ status: 201, body: { key: 'down', aborted: true } });
    if (cell.focus === 'nest') {
      // Nest's shutdown hooks re-raise SIGTERM once the app has closed.
      expect(down.express).toMatchObject({ code: null, signal: 'SIGTERM' });
    } else {
      // As the Fastify process below: it ends once nothing is left open.
      expect(down.express).toMatchObject({ code: 0, signal: null });
    }
    expect(down.express.afterTermMs).toBeGreaterThanOrEqual(CELL_SHUTDOWN_TIMEOUT_MS - 50);
    expect(down.express.afterTermMs).toBeLessThan(CELL_SHUTDOWN_TIMEOUT_MS + 5_000);
    // Without process.exit, the process ends only once every socket and timer is closed.
    expect(down.fastify).toMatchObject({ code: 0, signal: null });
    expect(down.fastify.afterTermMs).toBeLessThan(5_000);
  });

  if (cell.sql) {
    const checks = [
      'table',
      'for-update',
      'advisory',
      ...(cell.sqliteDriver ? ['sqlite table'] : []),
    ];
    const what = cell.sqliteDriver
      ? `TypeORM ${stack.sql?.typeorm} on Postgres and SQLite (better-sqlite3 ${cell.sqliteDriver.version} as driver)`
      : `TypeORM ${stack.sql?.typeorm} on Postgres`;
    it(`${what}: every strategy excludes and fences`, () => {
      const sql = must(reportOf(cell).sql, 'sql');
      expect(sql.map((r) => r.strategy)).toEqual(checks);
      for (const result of sql) {
        expect(result.refusedWhileHeld).toBe(true);
        const [first, second] = result.fences;
        expect(typeof first).toBe('number');
        expect(second).toBeGreaterThan(first as number);
      }
    });
  }
});

describe('compatibility matrix', () => {
  it('covers every supported NestJS major and Node line', () => {
    expect(new Set(CELLS.map((c) => c.nest))).toEqual(new Set([10, 11, 12]));
    expect(new Set(CELLS.map((c) => c.node))).toEqual(new Set([20, 22, 24]));
  });

  it('covers every Redis client family, each through url and own client, and Redlock', () => {
    for (const client of REDIS_CLIENT_PACKAGES) {
      const wirings = CELLS.filter((c) => c.redis.client === client).flatMap((c) => c.redis.wiring);
      expect(wirings).toEqual(expect.arrayContaining(['url', 'client']));
    }
    expect(CELLS.some((c) => c.redis.wiring.every((w) => w === 'redlock'))).toBe(true);
  });

  it('the peer ranges and engines of package.json admit every cell', () => {
    const pkg = readJson<{
      engines: { node: string };
      peerDependencies: Record<string, string>;
    }>(path.join(REPO_ROOT, 'package.json'));
    const majors = (range: string) => [...range.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1]));
    for (const cell of CELLS) {
      expect(admits(pkg.peerDependencies[cell.redis.client], cell.redis.version)).toBe(true);
      expect(majors(pkg.peerDependencies['@nestjs/common'])).toContain(cell.nest);
      expect(majors(pkg.peerDependencies['@nestjs/core'])).toContain(cell.nest);
      expect(majors(pkg.engines.node)).toContain(cell.node);
      const terminus = Number(NEST_STACKS[cell.nest].app['@nestjs/terminus'].split('.')[0]);
      expect(majors(pkg.peerDependencies['@nestjs/terminus'])).toContain(terminus);
    }
  });

  it('the README compatibility table is the one rendered from test/compat/cells.ts', () => {
    const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    expect(withReadmeBlock(readme, readmeBlock(CELLS))).toBe(readme);
  });
});

/** Whether `version` satisfies one of the `^x.y.z` alternatives of `range` (npm's caret rule). */
function admits(range: string, version: string): boolean {
  const [major, minor, patch] = version.split('.').map(Number);
  return range.split('||').some((alternative) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(alternative);
    if (!m) throw new Error(`not a caret range: ${alternative}`);
    const [x, y, z] = m.slice(1).map(Number);
    const atLeast = major > x || (major === x && (minor > y || (minor === y && patch >= z)));
    // ^0.y.z admits 0.y only; ^x.y.z (x > 0) admits x only.
    return atLeast && major === x && (x > 0 || minor === y);
  });
}

/** Compares two decimal nanosecond strings. */
function compareNs(a: Section['start'], b: Section['start']): number {
  const d = BigInt(a) - BigInt(b);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}
