import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import { builtinModules } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import ts from 'typescript';
import {
  packTarball,
  readJson,
  lockedVersion,
  REPO_ROOT,
  runCommand,
} from '../support/packed-package';

// Packaging (issue 9): the `npm pack` tarball installs into a fresh NestJS app with only the
// peers of the backend it uses, runs there, and its published types import no optional peer.

const root = REPO_ROOT;
const fixtures = path.join(root, 'test', 'support', 'packed-app');
const REDIS_URL = 'redis://127.0.0.1:6379';

/** Peers every app has anyway; the main entry's types may import only these (and node). */
const CORE_PEERS = ['@nestjs/common', '@nestjs/core', 'reflect-metadata', 'rxjs'] as const;
/** The one backend peer the temp app installs. */
const USED_PEER = 'ioredis';
/** Must not be in the temp app: optional peers of unused backends and of optional features. */
const ABSENT = [
  'redis',
  'iovalkey',
  'node-zookeeper-client',
  'typeorm',
  '@nestjs/terminus',
  '@opentelemetry/api',
] as const;
/**
 * Extra packages the types of each `exports` subpath may import, on top of CORE_PEERS. A subpath
 * exists to keep its peer out of the main entry, so a new one must be listed here on purpose.
 */
const SUBPATH_PEERS: Readonly<Record<string, readonly string[]>> = {
  '.': [],
  './typeorm': ['typeorm'],
  './terminus': ['@nestjs/terminus'],
  './testing': [],
};

/** runCommand with positional arguments, as every call here uses them. */
const run = (cmd: string, args: string[], cwd: string, timeoutMs: number) =>
  runCommand(cmd, args, { cwd, timeoutMs });

const timings: Record<string, number> = {};
async function timed<T>(step: string, fn: () => Promise<T>): Promise<T> {
  const start = performance.now();
  try {
    return await fn();
  } finally {
    timings[step] = Math.round(performance.now() - start);
  }
}

/** Module specifiers of a declaration file: imports, re-exports, import types, references. */
function specifiersOf(text: string): string[] {
  // TypeScript's own pre-processor: skips comments and strings, sees `import('x')` type queries.
  const info = ts.preProcessFile(text, true, true);
  return [...info.importedFiles, ...info.referencedFiles, ...info.typeReferenceDirectives].map(
    (ref) => ref.fileName,
  );
}

function packageNameOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

function isNodeBuiltin(specifier: string): boolean {
  // `/// <reference types="node" />` means @types/node, i.e. the builtins.
  return (
    specifier === 'node' ||
    specifier.startsWith('node:') ||
    builtinModules.includes(packageNameOf(specifier))
  );
}

/** The `.d.ts` a relative specifier of `fromFile` names, as TypeScript would pick it. */
function resolveRelative(fromFile: string, specifier: string): string {
  const base = path.resolve(path.dirname(fromFile), specifier);
  const candidates = [
    base,
    `${base}.d.ts`,
    base.replace(/\.[cm]?js$/, '.d.ts'),
    path.join(base, 'index.d.ts'),
  ];
  const found = candidates.find((c) => c.endsWith('.d.ts') && fs.existsSync(c));
  if (!found) throw new Error(`${fromFile} imports "${specifier}", which is not in the package`);
  return found;
}

/** Every declaration file reachable from `entry`, with the packages each one imports. */
function reachableTypes(entry: string): Map<string, string[]> {
  const seen = new Map<string, string[]>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    const packages: string[] = [];
    for (const specifier of specifiersOf(fs.readFileSync(file, 'utf8'))) {
      if (specifier.startsWith('.')) queue.push(resolveRelative(file, specifier));
      else packages.push(specifier);
    }
    seen.set(file, packages);
  }
  return seen;
}

/** The types file of one `exports` target (string, conditions object or fallback array). */
function typesTarget(target: unknown): string | undefined {
  if (typeof target === 'string') {
    if (target.endsWith('.d.ts')) return target;
    if (/\.[cm]?js$/.test(target)) return target.replace(/\.[cm]?js$/, '.d.ts');
    return undefined; // e.g. "./package.json": no types to check
  }
  if (Array.isArray(target)) return typesTarget(target[0]);
  if (target && typeof target === 'object') {
    const conditions = target as Record<string, unknown>;
    for (const condition of ['types', 'require', 'node', 'default', 'import']) {
      if (condition in conditions) return typesTarget(conditions[condition]);
    }
  }
  return undefined;
}

function listDeclarationFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.d.ts') && !f.split(path.sep).includes('node_modules'))
    .map((f) => path.join(dir, f));
}

interface PackedPackageJson {
  name: string;
  types?: string;
  exports: Record<string, unknown>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/**
 * Checks the declaration files of the package installed at `pkgDir`: those reachable from each
 * `exports` entry may import CORE_PEERS, node builtins and that entry's SUBPATH_PEERS; files no
 * entry reaches are still published, so they get the main entry's rule. Throws on an entry with
 * types but no rule, or whose types file is missing.
 */
function typeImportViolations(pkgDir: string): {
  violations: string[];
  filesPerEntry: Record<string, number>;
} {
  const pkg = readJson<PackedPackageJson>(path.join(pkgDir, 'package.json'));
  const violations: string[] = [];
  const filesPerEntry: Record<string, number> = {};
  const checked = new Set<string>();
  const check = (files: Map<string, string[]>, label: string, extra: readonly string[]) => {
    const allowed = new Set<string>([...CORE_PEERS, ...extra]);
    for (const [file, packages] of files) {
      checked.add(file);
      for (const specifier of packages) {
        if (isNodeBuiltin(specifier) || allowed.has(packageNameOf(specifier))) continue;
        violations.push(`${label}: ${path.relative(pkgDir, file)} imports "${specifier}"`);
      }
    }
  };

  const mainTypes = typesTarget(pkg.exports['.']);
  if (!mainTypes) throw new Error('exports["."] has no types');
  if (pkg.types && path.normalize(pkg.types) !== path.normalize(mainTypes)) {
    throw new Error(`"types" (${pkg.types}) is not exports["."] types (${mainTypes})`);
  }
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = typesTarget(target);
    if (types === undefined) continue;
    const extra = SUBPATH_PEERS[subpath];
    if (!extra) {
      throw new Error(
        `exports["${subpath}"] has types but no rule: add it to SUBPATH_PEERS in ` +
          'test/e2e/npm-pack.e2e-spec.ts with the optional peers its types may import',
      );
    }
    const entry = path.join(pkgDir, types);
    if (!fs.existsSync(entry)) throw new Error(`exports["${subpath}"] types ${types} is missing`);
    const files = reachableTypes(entry);
    filesPerEntry[subpath] = files.size;
    check(files, `exports["${subpath}"]`, extra);
  }
  for (const file of listDeclarationFiles(pkgDir).filter((f) => !checked.has(f))) {
    const packages = specifiersOf(fs.readFileSync(file, 'utf8')).filter((s) => !s.startsWith('.'));
    check(new Map([[file, packages]]), 'unreached by any entry', []);
  }
  return { violations, filesPerEntry };
}

describe('npm pack: the tarball in a fresh NestJS app', () => {
  let tmp = '';
  let app = '';
  let installed = '';
  let packedFiles: string[] = [];

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-npm-pack-'));
    app = path.join(tmp, 'app');
    fs.mkdirSync(app);

    const packed = await timed('pack', () => packTarball(tmp));
    packedFiles = packed.files;

    const pkg = readJson<{ name: string }>(path.join(root, 'package.json'));
    const dependencies: Record<string, string> = {
      [pkg.name]: `file:${packed.file}`,
    };
    for (const name of [...CORE_PEERS, USED_PEER]) dependencies[name] = lockedVersion(name);
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: 'packed-app', version: '0.0.0', private: true, dependencies }),
    );
    // The repo's `npm ci` filled the cache, so this is mostly offline.
    await timed('install', () =>
      run(
        'npm',
        ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
        app,
        90_000,
      ),
    );
    installed = path.join(app, 'node_modules', pkg.name);
  }, 180_000);

  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    const line = Object.entries(timings)
      .map(([step, ms]) => `${step} ${(ms / 1000).toFixed(1)}s`)
      .join(', ');
    process.stdout.write(`npm-pack e2e timings: ${line}\n`);
  });

  it('ships only the build, and installs with the used backend peer only', () => {
    expect(packedFiles).toContain('dist/index.js');
    expect(packedFiles).toContain('dist/index.d.ts');
    expect(packedFiles.filter((f) => f.startsWith('lib/') || f.startsWith('test/'))).toEqual([]);
    const topLevel = packedFiles.filter((f) => !f.startsWith('dist/')).sort();
    expect(topLevel).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'package.json']);

    const present = (name: string) => fs.existsSync(path.join(app, 'node_modules', name));
    expect(present(USED_PEER)).toBe(true);
    expect(ABSENT.filter(present)).toEqual([]);

    // npm installs required peers by itself: every peer beyond the core ones must be optional.
    const packedPkg = readJson<PackedPackageJson>(path.join(installed, 'package.json'));
    const required = Object.keys(packedPkg.peerDependencies ?? {}).filter(
      (name) => packedPkg.peerDependenciesMeta?.[name]?.optional !== true,
    );
    expect(required.sort()).toEqual([...CORE_PEERS].sort());

    // lib/ is not shipped, so each source map must carry its sources to be of use.
    const maps = packedFiles.filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(0);
    const withoutSources = maps.filter((f) => {
      const map = readJson<{ sources: string[]; sourcesContent?: (string | null)[] }>(
        path.join(installed, f),
      );
      return map.sourcesContent?.length !== map.sources.length || map.sourcesContent.includes(null);
    });
    expect(withoutSources).toEqual([]);
  });

  it('runs a CommonJS Nest app on Redis: @Locked, withLock, fences, refusal', async () => {
    fs.copyFileSync(path.join(fixtures, 'main.cjs'), path.join(app, 'main.cjs'));
    const keyPrefix = `npm-pack-${process.pid}-${Date.now()}:`;
    const { stdout } = await timed('run redis app', () =>
      run(process.execPath, ['main.cjs', 'redis', keyPrefix, REDIS_URL], app, 30_000),
    );
    const result = JSON.parse(stdout) as {
      locked: { key: string; fence: number; held: boolean };
      lockedBusyTryRefused: boolean;
      lockedIsLocked: boolean;
      fences: number[];
      withLockBusyTryRefused: boolean;
      freeAfter: boolean;
      heldKeys: number;
      leftoverKeys: string[];
    };
    expect(result).toMatchObject({
      locked: { key: 'stock:sku-1', held: true },
      lockedBusyTryRefused: true,
      lockedIsLocked: true,
      withLockBusyTryRefused: true,
      freeAfter: true,
    });
    // Three grants of one key: fences rise strictly (its bucket's counter is shared with other
    // keys, and other tests', so they need not start at 1 nor be consecutive).
    expect(result.fences).toHaveLength(3);
    expect(result.fences[0]).toBeGreaterThan(0);
    expect(result.fences[1]).toBeGreaterThan(result.fences[0]);
    expect(result.fences[2]).toBeGreaterThan(result.fences[1]);
    // The held lock really lived in Redis under the prefix, and once released only the fence
    // bucket counter its grants drew from is left there (one per bucket, not one per key).
    expect(result.heldKeys).toBeGreaterThan(0);
    expect(result.leftoverKeys).toHaveLength(1);
    const [counter] = result.leftoverKeys;
    expect(counter.startsWith(`${keyPrefix}{`)).toBe(true);
    expect(counter.endsWith('}nestjs-distributed-lock:fence')).toBe(true);
  }, 60_000);

  it('has what the npm package page shows: license, description, keywords, changelog entry', () => {
    const pkg = readJson<{
      name: string;
      version: string;
      license?: string;
      description?: string;
      keywords?: string[];
      files?: string[];
    }>(path.join(installed, 'package.json'));
    expect(pkg.license).toBe('MIT');
    expect(fs.readFileSync(path.join(installed, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
    expect(pkg.description?.length).toBeGreaterThan(40);
    expect(pkg.keywords).toEqual(expect.arrayContaining(['nestjs', 'distributed-lock', 'redis']));
    // The version says what changed: the changelog has a section for it.
    const changelog = fs.readFileSync(path.join(installed, 'CHANGELOG.md'), 'utf8');
    expect(changelog).toContain(`\n## ${pkg.version} `);
  });

  it('the published types expose no internal class: the engine, backends and contract stay private', () => {
    const pkg = readJson<PackedPackageJson>(path.join(installed, 'package.json'));
    const reachable = new Map<string, string>();
    for (const target of Object.values(pkg.exports)) {
      const types = typesTarget(target);
      if (types === undefined) continue;
      for (const file of reachableTypes(path.join(installed, types)).keys()) {
        reachable.set(path.relative(installed, file), fs.readFileSync(file, 'utf8'));
      }
    }
    // The public surface: the entries, the module, service, decorators, errors, options types.
    const internal = [...reachable.keys()].filter(
      (f) =>
        /^dist\/(core\/(engine|contract|shared)|http)\//.test(f) ||
        (f.startsWith('dist/backends/') && f !== 'dist/backends/backend-config.d.ts'),
    );
    expect(internal).toEqual([]);
    // Declarations only: doc comments may say "lease" in prose.
    const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const mentions = [...reachable].filter(([, text]) =>
      /\b(LockEngine|LockManager|LockHandle|Lease|BackendRegistry|LOCK_ENGINE)\b/.test(code(text)),
    );
    expect(mentions.map(([file]) => file)).toEqual([]);
    // LockService is injected, never constructed: its constructor takes nothing a user has.
    expect(reachable.get('dist/lock.service.d.ts')).toMatch(/private constructor\(\);/);
    expect(reachable.get('dist/lock.module.d.ts')).not.toMatch(/constructor\(/);
  });

  it('every exports subpath has types under node10 resolution too (typesVersions)', () => {
    const pkg = readJson<
      PackedPackageJson & { typesVersions?: Record<string, Record<string, string[]>> }
    >(path.join(installed, 'package.json'));
    const mapped = pkg.typesVersions?.['*'] ?? {};
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      const types = typesTarget(target);
      if (subpath === '.' || types === undefined) continue;
      expect({ subpath, types: mapped[subpath.slice(2)] }).toEqual({
        subpath,
        types: [path.normalize(types)],
      });
    }
  });

  it('a backend whose peer is not installed fails with LockConfigError naming it', async () => {
    fs.copyFileSync(path.join(fixtures, 'main.cjs'), path.join(app, 'main.cjs'));
    const configs = [
      { type: 'zookeeper', connectionString: '127.0.0.1:2181' },
      { type: 'typeorm', dataSourceOptions: { type: 'postgres', host: '127.0.0.1' } },
    ];
    const { stdout } = await timed('run missing peers', () =>
      run(
        process.execPath,
        ['main.cjs', 'missing-peer', 'npm-pack-missing:', JSON.stringify(configs)],
        app,
        30_000,
      ),
    );
    const results = JSON.parse(stdout) as {
      type: string;
      isLockConfigError: boolean;
      code: string | null;
      message: string | null;
    }[];
    const peerOf: Record<string, string> = {
      zookeeper: 'node-zookeeper-client',
      typeorm: 'typeorm',
    };
    expect(results.map((r) => r.type)).toEqual(configs.map((c) => c.type));
    for (const r of results) {
      const peer = peerOf[r.type];
      expect({ type: r.type, isLockConfigError: r.isLockConfigError, code: r.code }).toEqual({
        type: r.type,
        isLockConfigError: true,
        code: 'LOCK_CONFIG',
      });
      expect(r.message).toContain(`"${peer}"`);
      expect(r.message).toContain(`npm install ${peer}`);
    }
  }, 60_000);

  it('type-checks a strict TypeScript consumer with no optional peer installed', async () => {
    const source = fs.readFileSync(path.join(fixtures, 'consumer.ts.txt'), 'utf8');
    // The same code as a CommonJS (.ts, no "type": "module") and an ES module (.mts) consumer.
    fs.writeFileSync(path.join(app, 'consumer.ts'), source);
    fs.writeFileSync(path.join(app, 'consumer.mts'), source);
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const common = [
      ...['--noEmit', '--strict', '--target', 'es2023'],
      ...['--experimentalDecorators', '--emitDecoratorMetadata'],
      // Nest's own types need @types/node, a dev tool of every Nest app (not a peer of ours):
      // borrowed from the repo instead of installed, to keep the install small.
      ...['--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types')],
      'consumer.ts',
      'consumer.mts',
    ];
    const modes = [
      // nodenext follows the `exports` map as Node does (and, since TS 5.8, allows require of
      // the ESM-only @nestjs/*, as Node >= 20.19 does). skipLibCheck false: an error in any
      // declaration file, ours or @nestjs's, fails; an import of a missing peer is one.
      ['--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', 'false'],
      // bundler is how bundled apps resolve; the declaration files were checked just above,
      // so this run checks only the consumer (skipLibCheck halves CI time on a busy runner).
      ['--module', 'preserve', '--moduleResolution', 'bundler', '--skipLibCheck', 'true'],
    ];
    const outcomes = await timed('tsc', () =>
      Promise.all(
        modes.map((mode) =>
          run(process.execPath, [tsc, ...common, ...mode], app, 90_000).then(
            () => ({ mode: mode[1], errors: '' }),
            (err: Error) => ({ mode: mode[1], errors: err.message }),
          ),
        ),
      ),
    );
    expect(outcomes).toEqual([
      { mode: 'nodenext', errors: '' },
      { mode: 'preserve', errors: '' },
    ]);
  }, 120_000);

  it('finds every kind of module reference in a declaration file', () => {
    const sample = [
      '/// <reference types="node" />',
      '/// <reference path="./globals.d.ts" />',
      "/** e.g. import { X } from 'in-a-comment' */",
      "import 'side-effect';",
      "import type { A } from 'type-only';",
      "export { B } from './relative';",
      "export * from '@scope/star';",
      "import C = require('import-equals');",
      "export declare const d: import('import-type').D;",
      'export declare const e: typeof import("typeof-import");',
    ].join('\n');
    expect(specifiersOf(sample).sort()).toEqual(
      [
        'node',
        './globals.d.ts',
        'side-effect',
        'type-only',
        './relative',
        '@scope/star',
        'import-equals',
        'import-type',
        'typeof-import',
      ].sort(),
    );
  });

  it('the published types of each entry import only its allowed peers', () => {
    const { violations, filesPerEntry } = typeImportViolations(installed);
    expect(violations).toEqual([]);
    // Every entry really was walked: the main one reaches more than its index.
    expect(filesPerEntry['.']).toBeGreaterThan(1);
  });

  it('the type import rules catch a peer in the main entry and an unlisted subpath', () => {
    // A made-up package, so the rules are shown to bite without breaking the real one.
    const fake = path.join(tmp, 'fake-package');
    const write = (file: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(fake, file)), { recursive: true });
      fs.writeFileSync(path.join(fake, file), text);
    };
    const exportsMap: Record<string, unknown> = {
      '.': { types: './dist/index.d.ts', default: './dist/index.js' },
      './typeorm': { types: './dist/typeorm/index.d.ts', default: './dist/typeorm/index.js' },
      './package.json': './package.json',
    };
    write('package.json', JSON.stringify({ name: 'fake', exports: exportsMap }));
    write('dist/index.d.ts', "export * from './config';\nimport 'reflect-metadata';\n");
    write(
      'dist/config.d.ts',
      "import type { Redis } from 'ioredis';\nexport declare const c: Redis | import('node:events').EventEmitter;\n",
    );
    write(
      'dist/typeorm/index.d.ts',
      "import type { DataSource } from 'typeorm';\nexport type T = import('@nestjs/terminus').HealthIndicatorResult | DataSource;\n",
    );
    write('dist/internal.d.ts', "export type { Cluster } from 'ioredis';\n");
    expect(typeImportViolations(fake).violations).toEqual([
      'exports["."]: dist/config.d.ts imports "ioredis"',
      'exports["./typeorm"]: dist/typeorm/index.d.ts imports "@nestjs/terminus"',
      'unreached by any entry: dist/internal.d.ts imports "ioredis"',
    ]);

    exportsMap['./redis'] = { types: './dist/index.d.ts', default: './dist/index.js' };
    write('package.json', JSON.stringify({ name: 'fake', exports: exportsMap }));
    expect(() => typeImportViolations(fake)).toThrow(
      'exports["./redis"] has types but no rule: add it to SUBPATH_PEERS',
    );
  });
});
