// The compatibility matrix: which NestJS majors and Node lines are tested together, and what a
// fresh app of each major installs. The README's compatibility table is rendered from this file
// (test/compat/compat-matrix.e2e-spec.ts checks that it is).
import { lockedVersion } from '../support/packed-package';

/** A NestJS major the package supports. */
export type NestMajor = 10 | 11 | 12;

/**
 * How the cell's app is compiled and loaded:
 * - `commonjs`: `module: commonjs` (classic node10 resolution), the Nest 10 CLI's starter;
 * - `nodenext`: `module: nodenext` in a CommonJS package, the Nest 11 CLI's starter;
 * - `esm`: `module: nodenext` in a `"type": "module"` package, an ES-module app.
 */
export type AppModuleKind = 'commonjs' | 'nodenext' | 'esm';

/** What a fresh app of one NestJS major installs: the newest release of each package there. */
export interface NestStack {
  /** The app's own dependencies before it adds this package (exact versions). */
  readonly app: Readonly<Record<string, string>>;
  /** The TypeORM line its `@nestjs/typeorm` uses, with the Postgres driver, when tested. */
  readonly sql?: Readonly<Record<string, string>>;
}

export const NEST_STACKS: Readonly<Record<NestMajor, NestStack>> = {
  10: {
    app: {
      '@nestjs/common': '10.4.9',
      '@nestjs/core': '10.4.9',
      '@nestjs/platform-express': '10.4.9',
      '@nestjs/platform-fastify': '10.4.9',
      '@nestjs/schedule': '4.1.2',
      '@nestjs/config': '3.3.0',
      // terminus 10 has no HealthIndicatorService; 11 supports NestJS 10 and 11.
      '@nestjs/terminus': '11.1.1',
      // Nest 10 apps were generated with reflect-metadata 0.1; Nest accepts both lines.
      'reflect-metadata': '0.1.14',
      rxjs: '7.8.2',
    },
    sql: { typeorm: '0.3.31', pg: '8.16.3' },
  },
  11: {
    app: {
      '@nestjs/common': '11.2.10',
      '@nestjs/core': '11.2.10',
      '@nestjs/platform-express': '11.2.10',
      '@nestjs/platform-fastify': '11.2.8',
      '@nestjs/schedule': '6.1.3',
      '@nestjs/config': '4.0.4',
      '@nestjs/terminus': '11.1.1',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
    },
  },
  12: {
    app: {
      '@nestjs/common': '12.5.1',
      '@nestjs/core': '12.5.1',
      '@nestjs/platform-express': '12.5.1',
      '@nestjs/platform-fastify': '12.5.0',
      '@nestjs/schedule': '12.0.2',
      '@nestjs/config': '12.0.1',
      '@nestjs/terminus': '12.1.0',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
    },
    sql: { typeorm: '1.1.1', pg: '8.16.3' },
  },
};

/** The exact Node release tested for each supported line. */
export const NODE_RELEASES = { 20: '20.20.2', 22: '22.23.3', 24: '24.21.0' } as const;

/** A Node line the package supports. */
export type NodeLine = keyof typeof NODE_RELEASES;

/** A Redis client package an app can lock through (`redis` is node-redis). */
export type RedisClientPackage = 'ioredis' | 'redis' | 'iovalkey';

/**
 * How one app process hands its store to the module:
 * - `url`: the README's forRootAsync example, `{ type: 'redis', url }`: the module makes its
 *   client with the first Redis client package installed;
 * - `client`: `{ type: 'redis', client }`, the app's own connected client, which the app closes
 *   in its own shutdown hook;
 * - `redlock`: `{ type: 'redlock', urls }` over three redis-server nodes started for the run.
 */
export type LockWiring = 'url' | 'client' | 'redlock';

/** The Redis client a cell's app has, and how its two processes reach the store with it. */
export interface CellRedis {
  /** The app's only Redis client package (npm ls must show no other, nor `redlock`). */
  readonly client: RedisClientPackage;
  /** Its exact version. */
  readonly version: string;
  /**
   * `app`: in the app's package.json, installed before the library is added (an app already
   * on it); `with-package`: named with the library in the user's `npm install` (the README's).
   */
  readonly installed: 'app' | 'with-package';
  /** The Express process's wiring, then the Fastify process's. */
  readonly wiring: readonly [LockWiring, LockWiring];
}

/**
 * What the README tells users to run: `npm install nestjs-distributed-lock ioredis`, with the
 * repo's own ioredis (package-lock), so the temp apps test what CI tests.
 */
const README_IOREDIS: CellRedis = {
  client: 'ioredis',
  version: lockedVersion('ioredis'),
  installed: 'with-package',
  wiring: ['url', 'url'],
};

/** Redlock over three nodes, installed as for a single Redis: the library and ioredis only. */
const README_IOREDIS_REDLOCK: CellRedis = { ...README_IOREDIS, wiring: ['redlock', 'redlock'] };

/** One cell of the matrix. */
export interface Cell {
  readonly nest: NestMajor;
  readonly node: NodeLine;
  readonly module: AppModuleKind;
  /** The app's Redis client and how it hands the store to the module. */
  readonly redis: CellRedis;
  /**
   * What the cell is about, which decides two checks:
   * - `nest`: a NestJS major on a Node line. The Express process shuts down through
   *   `enableShutdownHooks()` (Nest re-raises SIGTERM once closed, so the process ends whatever
   *   is left open), and `@Cron` + `@Locked({ onBusy: 'skip' })` is checked (~10 s of ticks);
   * - `redis`: a Redis client, or Redlock. Both processes shut down through `app.close()` only,
   *   so each exits only once every connection of its wiring is closed (those the module made,
   *   those it derived from the app's own client, and that client, closed by the app); the
   *   scheduler, the same whatever the client, is left to the `nest` cells.
   */
  readonly focus: 'nest' | 'redis';
  /** Also lock through TypeORM on PostgreSQL (`NEST_STACKS[nest].sql`). */
  readonly sql: boolean;
  /**
   * Also lock on SQLite with this better-sqlite3, installed under its own name and handed to
   * TypeORM as its `driver`, as the README tells Node 24 users to: 12 aborts the process there,
   * and 13 is outside TypeORM 1.1's peer range (^12).
   */
  readonly sqliteDriver?: { readonly alias: string; readonly version: string };
  /** Why this cell is in the matrix. */
  readonly why: string;
}

/**
 * Every major and every Node line, not every product: the pairs users run that could break
 * differently. The oldest pair and the newest; NestJS 12 (ES modules only) loaded by a CommonJS
 * package on the oldest Node that can (`require(esm)` from Node 20.19); NestJS 10 on the newest
 * Node; NestJS 11 on the LTS most teams deploy.
 */
export const CELLS: readonly Cell[] = [
  {
    nest: 10,
    node: 20,
    module: 'commonjs',
    sql: true,
    redis: README_IOREDIS,
    focus: 'nest',
    why: 'oldest pair; TypeORM 0.3',
  },
  {
    nest: 10,
    node: 24,
    module: 'commonjs',
    sql: false,
    redis: README_IOREDIS,
    focus: 'nest',
    why: 'oldest NestJS on the newest Node',
  },
  {
    nest: 11,
    node: 22,
    module: 'nodenext',
    sql: false,
    redis: README_IOREDIS,
    focus: 'nest',
    why: 'the most common pair',
  },
  {
    nest: 12,
    node: 20,
    module: 'nodenext',
    sql: false,
    redis: README_IOREDIS,
    focus: 'nest',
    why: 'ESM-only NestJS through require(esm) on Node 20',
  },
  {
    nest: 12,
    node: 24,
    module: 'esm',
    sql: true,
    sqliteDriver: { alias: 'better-sqlite3-node22', version: '13.2.0' },
    redis: README_IOREDIS,
    focus: 'nest',
    why: 'newest pair, as an ES-module app; TypeORM 1.x',
  },
  // The Redis clients users arrive with, on the pair that needs no other Node binary. In the
  // first three, Express passes the app's own client and Fastify a url the module makes its
  // client from with the one package installed: both paths of that client lock one key space.
  {
    nest: 12,
    node: 20,
    module: 'nodenext',
    sql: false,
    redis: { client: 'ioredis', version: '6.0.0', installed: 'app', wiring: ['client', 'url'] },
    focus: 'redis',
    why: 'an app already on ioredis 6',
  },
  {
    nest: 12,
    node: 20,
    module: 'nodenext',
    sql: false,
    redis: { client: 'redis', version: '6.3.1', installed: 'app', wiring: ['client', 'url'] },
    focus: 'redis',
    why: 'a node-redis app, no ioredis',
  },
  {
    nest: 12,
    node: 20,
    module: 'nodenext',
    sql: false,
    redis: { client: 'iovalkey', version: '0.4.0', installed: 'app', wiring: ['client', 'url'] },
    focus: 'redis',
    why: 'an iovalkey app, no ioredis',
  },
  {
    nest: 12,
    node: 20,
    module: 'nodenext',
    sql: false,
    redis: README_IOREDIS_REDLOCK,
    focus: 'redis',
    why: 'Redlock without the redlock package',
  },
];

/** A short name for a cell, used for temp folders, key prefixes and test titles. */
export function cellName(cell: Cell): string {
  const { client, version, wiring } = cell.redis;
  const major = version.split('.')[0];
  const wirings = [...new Set(wiring)].join('-');
  return `nest${cell.nest}-node${cell.node}-${cell.module}-${client}${major}-${wirings}`;
}

const WIRING_LABEL: Record<LockWiring, string> = {
  url: '`url`',
  client: 'own client',
  redlock: 'Redlock, 3 `urls`',
};

/** How a cell's processes reach the store, e.g. "own client (Express) / `url` (Fastify)". */
export function wiringLabel(cell: Cell): string {
  const [express, fastify] = cell.redis.wiring;
  if (express === fastify) return WIRING_LABEL[express];
  return `${WIRING_LABEL[express]} (Express) / ${WIRING_LABEL[fastify]} (Fastify)`;
}
