import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { backoffDelay, noAnswerError, sleep, withTimeout } from './timers';

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

describe('withTimeout', () => {
  it('settles like the promise when it settles in time', async () => {
    await expect(withTimeout(Promise.resolve(42), 1_000)).resolves.toBe(42);
    const boom = new Error('boom');
    await expect(withTimeout(Promise.reject(boom), 1_000)).rejects.toBe(boom);
  });

  it('rejects with "no answer within N ms" once ms have passed (checked every 10 ms)', async () => {
    const started = performance.now();
    const err = await withTimeout(never(), 40).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe('no answer within 40 ms');
    expect((err as Error).message).toBe(noAnswerError(40).message);
    expect(elapsed).toBeGreaterThanOrEqual(39);
    expect(elapsed).toBeLessThan(40 + 10 + 500);
  });

  it("rejects with onTimeout()'s error instead, when given", async () => {
    const mine = new Error('mine');
    await expect(withTimeout(never(), 20, { onTimeout: () => mine })).rejects.toBe(mine);
  });

  it('a late result after the timeout changes nothing', async () => {
    let resolveLate!: (v: string) => void;
    const late = new Promise<string>((r) => (resolveLate = r));
    const bounded = withTimeout(late, 20);
    await expect(bounded).rejects.toThrow('no answer within 20 ms');
    resolveLate('too late');
    await expect(bounded).rejects.toThrow('no answer within 20 ms');
  });

  it.each([Infinity, -Infinity, NaN])('passes the promise itself through for ms %p', (ms) => {
    const p = never<number>();
    expect(withTimeout(p, ms)).toBe(p);
  });

  it('times out many pending operations independently (one shared sweeper)', async () => {
    const started = performance.now();
    const settled: Array<[number, number]> = [];
    await Promise.all(
      [60, 20, 40].map((ms) =>
        withTimeout(never(), ms).catch(() => settled.push([ms, performance.now() - started])),
      ),
    );
    expect(settled.map(([ms]) => ms).sort((a, b) => a - b)).toEqual([20, 40, 60]);
    // each no sooner than its own ms (performance.now() may round a hair down)
    for (const [ms, at] of settled) expect(at).toBeGreaterThanOrEqual(ms - 1);
  });
});

/** Runs `script` in a fresh Node process that can load this file's TypeScript sibling. */
function runChild(script: string): Promise<{ code: number | null; out: string; ms: number }> {
  const root = process.cwd();
  const timers = JSON.stringify(join(root, 'lib/core/shared/timers.ts'));
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [
        '-r',
        join(root, 'scripts/ts-register.cjs'),
        '-e',
        `const { withTimeout } = require(${timers});\n${script}`,
      ],
      { timeout: 25_000 },
      (err, stdout) => {
        const code = err ? ((err as { code?: number }).code ?? null) : 0;
        if (err && (err as { killed?: boolean }).killed) reject(new Error('child was killed'));
        else
          resolve({
            code: typeof code === 'number' ? code : null,
            out: stdout,
            ms: performance.now() - started,
          });
      },
    );
  });
}

describe('withTimeout and the process lifetime', () => {
  it('a pending foreground operation keeps the process alive until its timeout', async () => {
    const child = await runChild(
      `withTimeout(new Promise(() => {}), 1500).catch((e) => console.log(e.message));`,
    );
    expect(child.out.trim()).toBe('no answer within 1500 ms');
    expect(child.ms).toBeGreaterThanOrEqual(1_500);
  }, 30_000);

  it('a pending background operation does not, nor once the foreground ones are done', async () => {
    const [background, mixed] = await Promise.all([
      runChild(
        `withTimeout(new Promise(() => {}), 60000, { background: true }).catch((e) => console.log(e.message));`,
      ),
      runChild(
        [
          `withTimeout(new Promise(() => {}), 60000, { background: true }).catch((e) => console.log(e.message));`,
          `withTimeout(new Promise((r) => setTimeout(r, 200)), 60000).then(() => console.log('foreground done'));`,
        ].join('\n'),
      ),
    ]);
    // Both would print the timeout after 60 s had the sweeper kept them alive.
    expect(background).toMatchObject({ code: 0, out: '' });
    expect(background.ms).toBeLessThan(20_000);
    expect(mixed).toMatchObject({ code: 0, out: 'foreground done\n' });
    expect(mixed.ms).toBeLessThan(20_000);
  }, 30_000);
});

describe('sleep', () => {
  it('resolves after ms', async () => {
    const started = performance.now();
    await sleep(30);
    expect(performance.now() - started).toBeGreaterThanOrEqual(29);
  });

  it('resolves as soon as the signal aborts, or at once if it already has', async () => {
    const controller = new AbortController();
    const started = performance.now();
    setTimeout(() => controller.abort(), 20);
    await sleep(60_000, controller.signal);
    expect(performance.now() - started).toBeLessThan(1_000);

    const before = performance.now();
    await sleep(60_000, controller.signal);
    expect(performance.now() - before).toBeLessThan(100);
  });
});

describe('backoffDelay', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  /** The delay at the two ends of Math.random's range. */
  const bounds = (attempt: number, base?: number, cap?: number): [number, number] => {
    const random = jest.spyOn(Math, 'random');
    random.mockReturnValue(0);
    const low = backoffDelay(attempt, base, cap);
    random.mockReturnValue(1 - Number.EPSILON);
    const high = backoffDelay(attempt, base, cap);
    random.mockRestore();
    return [low, high];
  };

  it('doubles a 5 ms step per attempt up to 250 ms, with half of it random', () => {
    expect(bounds(0)).toEqual([2.5, expect.closeTo(5, 6)]);
    expect(bounds(1)).toEqual([5, expect.closeTo(10, 6)]);
    expect(bounds(5)).toEqual([80, expect.closeTo(160, 6)]);
    expect(bounds(6)).toEqual([125, expect.closeTo(250, 6)]);
    expect(bounds(1_000)).toEqual([125, expect.closeTo(250, 6)]);
  });

  it('honours a custom base and cap', () => {
    expect(bounds(0, 100, 1_000)).toEqual([50, expect.closeTo(100, 6)]);
    expect(bounds(3, 100, 1_000)).toEqual([400, expect.closeTo(800, 6)]);
    expect(bounds(4, 100, 1_000)).toEqual([500, expect.closeTo(1_000, 6)]);
    expect(bounds(20, 100, 1_000)).toEqual([500, expect.closeTo(1_000, 6)]);
  });

  it('stays within [step / 2, step] for random draws', () => {
    for (let attempt = 0; attempt < 20; attempt++) {
      const step = Math.min(250, 5 * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const delay = backoffDelay(attempt);
        expect(delay).toBeGreaterThanOrEqual(step / 2);
        expect(delay).toBeLessThanOrEqual(step);
      }
    }
  });
});
