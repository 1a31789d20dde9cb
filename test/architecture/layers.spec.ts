/**
 * The layers of lib/, checked from the imports themselves so the architecture cannot drift
 * silently (docs/architecture.md draws it):
 *
 * - the backend contract (lib/core/contract) imports nothing outside itself;
 * - the engine side (lib/core) never imports a backend, the Nest module or the HTTP layer, and
 *   the per-call types it reads (lib/lock.interfaces.ts) import nothing (the module options,
 *   which name every backend's configuration, are in lib/lock.module-options.ts);
 * - a backend imports, outside its own folder, only the contract, the shared helpers and the
 *   errors (Redlock also the Redis folder it is built on);
 * - one file registers every backend (lib/backends/backend-types.ts), and only the module
 *   (the composition root) imports it;
 * - nothing of the Redis and Redlock backends above the client port knows which client runs:
 *   only their factories import an adapter or the builder (the rest, the port's interface);
 * - no file of the Redis and Redlock backends is over 400 lines (one idea per file).
 *
 * A fixture tree with one wrong import shows each rule fails when it should.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// Jest runs from the repository root (ESM mode: no __dirname).
const LIB = path.resolve(process.cwd(), 'lib');

/** Relative imports of every .ts file under `root`, as `lib`-relative paths without extension. */
function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = fs
    .readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const targets: string[] = [];
    for (const match of text.matchAll(/(?:from|import)\s*\(?\s*'(\.[^']+)'/g)) {
      const resolved = path.normalize(path.join(path.dirname(file), match[1]));
      targets.push(resolved.replace(/\\/g, '/'));
    }
    graph.set(file.replace(/\\/g, '/').replace(/\.ts$/, ''), targets);
  }
  return graph;
}

const under = (file: string, folder: string): boolean =>
  file === folder || file.startsWith(`${folder}/`);

/** Every import that breaks a rule, as "from -> to: rule". */
function violations(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const broken = (rule: string) => found.push(`${from} -> ${to}: ${rule}`);
      if (under(from, 'core/contract') && !under(to, 'core/contract')) {
        broken('the contract imports nothing outside itself');
      }
      if (from === 'lock.interfaces') {
        broken('the per-call types (which the engine reads) import nothing');
      }
      if (under(from, 'core') && !under(to, 'core') && !under(to, 'errors')) {
        if (to !== 'lock.interfaces') broken('the engine side imports no backend, module or HTTP');
      }
      if (under(from, 'backends') && from !== 'backends/backend-types') {
        const own = from.split('/').slice(0, 2).join('/');
        const allowed =
          under(to, own) ||
          under(to, 'core/contract') ||
          under(to, 'core/shared') ||
          under(to, 'errors') ||
          to === 'backends/backend-config' ||
          (own === 'backends/redlock' && under(to, 'backends/redis'));
        if (!allowed) broken('a backend imports only the contract, shared helpers and errors');
      }
      if (to === 'backends/backend-types' && from !== 'lock.module') {
        broken('only the module (composition root) imports the backend registration');
      }
      const adapter =
        under(to, 'backends/redis/port') &&
        to !== 'backends/redis/port/redis-port' &&
        to !== 'backends/redis/port/key-slot';
      const aboveThePort =
        (under(from, 'backends/redis') && !under(from, 'backends/redis/port')) ||
        under(from, 'backends/redlock');
      if (adapter && aboveThePort && !from.endsWith('.factory')) {
        broken('above the Redis port, only the factories know the client adapters');
      }
      const otherBackend =
        under(to, 'backends') &&
        to !== 'backends/backend-config' &&
        to !== 'backends/backend-types';
      if (otherBackend && !under(from, 'backends') && !under(from, 'typeorm')) {
        broken('outside lib/backends, only the registration and config types are imported');
      }
    }
  }
  return found;
}

/** Lines of every .ts file under `root`'s Redis and Redlock folders, over `max`, as "file: n". */
function oversized(root: string, max: number): string[] {
  return ['backends/redis', 'backends/redlock'].flatMap((folder) => {
    const dir = path.join(root, folder);
    if (!fs.existsSync(dir)) return [];
    return fs
      .readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) => {
        const lines = fs.readFileSync(path.join(dir, f), 'utf8').split('\n').length - 1;
        return lines > max ? [`${folder}/${f}: ${lines}`] : [];
      });
  });
}

describe('layers of lib/', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-layers-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('keep the plug-in seam one-way', () => {
    const graph = importGraph(LIB);
    expect(graph.size).toBeGreaterThan(40);
    expect(graph.get('backends/backend-types')?.length).toBeGreaterThanOrEqual(5);
    expect(violations(graph)).toEqual([]);
  });

  it('keep the Redis and Redlock files to one idea each: none over 400 lines', () => {
    expect(oversized(LIB, 400)).toEqual([]);
  });

  it('reports each kind of wrong import, and an oversized file (fixture)', () => {
    const write = (file: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(tmp, file)), { recursive: true });
      fs.writeFileSync(path.join(tmp, file), text);
    };
    write('core/contract/lock-backend.ts', "import type { X } from '../engine/lease';\n");
    write('core/engine/lease.ts', "import { R } from '../../backends/redis/redis.backend';\n");
    write('backends/redis/redis.backend.ts', "import { L } from '../../core/engine/lease';\n");
    write('backends/backend-types.ts', 'export const T = {};\n');
    write('http/x.ts', "import { T } from '../backends/backend-types';\n");
    write('lock.interfaces.ts', "import type { C } from './backends/backend-config';\n");
    write('backends/redis/waiter.ts', "import { P } from './port/ioredis-port';\n");
    write('backends/redis/redis.factory.ts', "import { B } from './port/client-builder';\n");
    write('backends/redlock/big.ts', 'x;\n'.repeat(401));
    const found = violations(importGraph(tmp));
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringContaining('the contract imports nothing outside itself'),
        expect.stringContaining('the engine side imports no backend'),
        expect.stringContaining('a backend imports only the contract'),
        expect.stringContaining('only the module (composition root)'),
        expect.stringContaining('the per-call types (which the engine reads) import nothing'),
        expect.stringContaining('above the Redis port, only the factories know'),
      ]),
    );
    expect(found).toHaveLength(7);
    expect(oversized(tmp, 400)).toEqual(['backends/redlock/big.ts: 401']);
  });
});
