/**
 * The API reference (`npm run docs:api`, TypeDoc over the three public entry points) builds
 * without a single warning: every public symbol is documented, every link resolves, nothing
 * public refers to something unexported. A fixture with one undocumented export shows the
 * check fails when it should.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, runCommand } from '../support/packed-package';

const TYPEDOC = path.join(REPO_ROOT, 'node_modules', 'typedoc', 'bin', 'typedoc');

/** Runs TypeDoc; resolves its exit code and everything it printed. */
async function typedoc(args: string[], cwd = REPO_ROOT): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await runCommand(process.execPath, [TYPEDOC, ...args], {
      cwd,
      timeoutMs: 120_000,
    });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { code: 1, output: message };
  }
}

describe('API reference (TypeDoc)', () => {
  let tmp = '';
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-api-docs-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('builds from the doc comments with no warning, one module per public entry point', async () => {
    const out = path.join(tmp, 'api');
    const { code, output } = await typedoc(['--out', out]);
    expect(output).not.toMatch(/warning|error/i);
    expect(code).toBe(0);
    expect(fs.existsSync(path.join(out, 'index.html'))).toBe(true);
    const modules = fs.readdirSync(path.join(out, 'modules')).sort();
    expect(modules).toEqual(['index.html', 'terminus.html', 'typeorm.html']);
    // The public classes are in it (a sample), the internal engine is not.
    const classes = fs.readdirSync(path.join(out, 'classes'));
    expect(classes).toEqual(
      expect.arrayContaining(['index.LockModule.html', 'index.LockService.html']),
    );
    expect(classes.filter((f) => /LockEngine|LockManager/.test(f))).toEqual([]);
  }, 120_000);

  it('fails on an undocumented export, with the same settings', async () => {
    const project = path.join(tmp, 'probe');
    fs.mkdirSync(project);
    fs.writeFileSync(
      path.join(project, 'index.ts'),
      '/** Documented. */\nexport const documented = 1;\nexport function undocumented(): number {\n  return 2;\n}\n',
    );
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, target: 'es2022' }, files: ['index.ts'] }),
    );
    // The repository's settings, with only the sources swapped.
    fs.writeFileSync(
      path.join(project, 'typedoc.json'),
      JSON.stringify({
        extends: [path.join(REPO_ROOT, 'typedoc.json')],
        entryPoints: ['index.ts'],
        tsconfig: 'tsconfig.json',
      }),
    );
    const { code, output } = await typedoc(
      ['--options', 'typedoc.json', '--emit', 'none'],
      project,
    );
    expect(output).toContain('undocumented');
    expect(output).toContain('does not have any documentation');
    expect(code).not.toBe(0);
  }, 120_000);
});
