/**
 * The README is the front door and the npm package page: its examples must work as written, and
 * its links must work where npm renders it (no relative links or images: npm resolves those
 * only through a `repository`, and the project names none).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';
import { ensureBuilt, readJson, REPO_ROOT, runCommand } from '../support/packed-package';

const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
/** Inside the repository, so that `nestjs-distributed-lock` resolves to this package (self-reference). */
const workDir = path.join(REPO_ROOT, '.tmp', `readme-examples-${process.pid}`);

/** The body of the first ```ts block after the heading line `heading` (e.g. `## Install`). */
function tsBlockAfter(heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README has no "${heading}" heading`);
  const block = /```ts\n([\s\S]*?)\n```/.exec(readme.slice(at));
  if (!block) throw new Error(`no ts block after "${heading}"`);
  return block[1];
}

/** GitHub's (and npm's) heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** Link and image targets of a markdown text, outside code blocks and code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)[^)]*\)/g)].map((m) => m[1]);
}

/** The text of `LockModule.forRootAsync({ ... })` starting at `source`'s first occurrence, dedented. */
function forRootAsyncCall(source: string): string {
  const lines = source.split('\n');
  const first = lines.findIndex((l) => l.includes('LockModule.forRootAsync({'));
  if (first < 0) throw new Error('no LockModule.forRootAsync({ in the text');
  const indent = /^ */.exec(lines[first])![0];
  const last = lines.findIndex((l, i) => i > first && l === `${indent}}),`);
  // Without its end the slice would be empty, and two empty texts compare equal.
  if (last < 0) throw new Error('LockModule.forRootAsync({ has no `}),` at its own indent');
  return lines
    .slice(first, last + 1)
    .map((l) => l.slice(indent.length))
    .join('\n');
}

describe('README', () => {
  it('has no relative link or image, and every in-page link names a heading', () => {
    const targets = linkTargets(readme);
    expect(targets.length).toBeGreaterThan(10);
    const relative = targets.filter((t) => !/^(https?:\/\/|#)/.test(t));
    expect(relative).toEqual([]);
    const headings = new Set(
      [...readme.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1])),
    );
    const broken = targets.filter((t) => t.startsWith('#') && !headings.has(t.slice(1)));
    expect(broken).toEqual([]);
  });

  it('the slug rule matches GitHub on the headings linked from the contents', () => {
    expect(slug('Metrics (OpenTelemetry → Prometheus)')).toBe('metrics-opentelemetry--prometheus');
    expect(slug("Redis (`type: 'redis'`, on ioredis 5/6, node-redis 4/5/6 or iovalkey)")).toBe(
      'redis-type-redis-on-ioredis-56-node-redis-456-or-iovalkey',
    );
    expect(linkTargets('[a](#x) `[b](c)` ![i](img.svg)\n```\n[d](e)\n```')).toEqual([
      '#x',
      'img.svg',
    ]);
  });

  it('every `npm run` script it names exists', () => {
    const scripts = readJson<{ scripts: Record<string, string> }>(
      path.join(REPO_ROOT, 'package.json'),
    ).scripts;
    const named = [...readme.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1]);
    expect(named.length).toBeGreaterThan(3);
    expect(named.filter((name) => !(name in scripts))).toEqual([]);
  });

  it('its forRootAsync example is the module the compatibility matrix runs', () => {
    const app = fs.readFileSync(
      path.join(REPO_ROOT, 'test', 'compat', 'app', 'app.module.ts'),
      'utf8',
    );
    expect(forRootAsyncCall(tsBlockAfter('### Reusing your clients and configuration'))).toBe(
      forRootAsyncCall(app),
    );
  });

  describe('the 30-second example, as written', () => {
    beforeAll(async () => {
      await ensureBuilt();
      fs.mkdirSync(workDir, { recursive: true });
      fs.writeFileSync(path.join(workDir, 'example.ts'), tsBlockAfter('## 30-second example'));
      fs.writeFileSync(
        path.join(workDir, 'run.ts'),
        [
          "import 'reflect-metadata';",
          "import { NestFactory } from '@nestjs/core';",
          "import { AppModule, InventoryService } from './example';",
          'async function main() {',
          "  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });",
          '  const inventory = app.get(InventoryService);',
          "  const first = await inventory.deduct('sku-1', 2);",
          '  const order: string[] = [];',
          '  await Promise.all([',
          "    inventory.recount('sku-1').then(() => order.push('recount')),",
          "    inventory.deduct('sku-1', 3).then(() => order.push('deduct')),",
          '  ]);',
          "  const soldOut = await inventory.deduct('sku-1', 99).catch((e: Error) => e.message);",
          "  const left = await inventory.recount('sku-1');",
          '  await app.close();',
          '  console.log(JSON.stringify({ first, order, soldOut, left }));',
          '}',
          'void main();',
        ].join('\n'),
      );
    }, 120_000);

    afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

    it('type-checks strictly against the published types', () => {
      const program = ts.createProgram([path.join(workDir, 'example.ts')], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        skipLibCheck: true,
        types: ['node'],
      });
      const errors = ts
        .getPreEmitDiagnostics(program)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(errors).toEqual([]);
      // It really was checked against the built package, not something else.
      const resolved = program
        .getSourceFiles()
        .map((f) => path.relative(REPO_ROOT, f.fileName))
        .filter((f) => f.startsWith('dist/'));
      expect(resolved).toContain('dist/index.d.ts');
    });

    it('runs: deducts with a fence, serializes per SKU, refuses to oversell', async () => {
      const { stdout } = await runCommand(
        process.execPath,
        ['-r', path.join(REPO_ROOT, 'scripts', 'ts-register.cjs'), path.join(workDir, 'run.ts')],
        { cwd: workDir, timeoutMs: 60_000 },
      );
      expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({
        first: { left: 8, fence: 1 },
        // recount holds stock:sku-1 for 100 ms; the deduction asked meanwhile waits for it.
        order: ['recount', 'deduct'],
        soldOut: 'sku-1 is sold out',
        left: 5,
      });
    });
  });
});
