import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkHistory,
  HistoryParseError,
  HistoryRecorder,
  parseHistory,
  readHistory,
  type HistoryEvent,
  type Violation,
  type ViolationKind,
} from './history';

// Hand-built events; `t` in nanoseconds as bigint, as readHistory returns them.
const acq = (
  worker: string,
  token: string,
  fence: number | null,
  t: bigint,
  key = 'k',
): HistoryEvent => ({
  ev: 'acq',
  worker,
  key,
  token,
  fence,
  t,
});
const rel = (worker: string, token: string, t: bigint, key = 'k'): HistoryEvent => ({
  ev: 'rel',
  worker,
  key,
  token,
  t,
});
const lost = (worker: string, token: string, t: bigint, key = 'k'): HistoryEvent => ({
  ev: 'lost',
  worker,
  key,
  token,
  t,
  reason: 'lease expired',
});
const witness = (
  worker: string,
  token: string,
  read: number,
  t: bigint,
  key = 'k',
  wrote = read + 1,
): HistoryEvent => ({ ev: 'witness', worker, key, token, read, wrote, t });

/** A complete hold [start, end] with release. */
const hold = (
  worker: string,
  token: string,
  fence: number | null,
  start: bigint,
  end: bigint,
  key = 'k',
): HistoryEvent[] => [acq(worker, token, fence, start, key), rel(worker, token, end, key)];

const kinds = (violations: readonly Violation[]): ViolationKind[] =>
  violations.map((v) => v.kind).sort();

describe('checkHistory catches violations', () => {
  it('reports overlapping holds of two workers, naming both', () => {
    const r = checkHistory([...hold('w1', 'a', 1, 10n, 20n), ...hold('w2', 'b', 2, 15n, 25n)]);
    expect(kinds(r.violations)).toEqual(['overlap']);
    const [v] = r.violations;
    expect(v.key).toBe('k');
    expect(v.holds.map((h) => h.token)).toEqual(['a', 'b']);
    expect(v.message).toContain('5 ns');
  });

  it('reports an overlap of a single nanosecond', () => {
    const r = checkHistory([...hold('w1', 'a', 1, 10n, 20n), ...hold('w2', 'b', 2, 19n, 30n)]);
    expect(kinds(r.violations)).toEqual(['overlap']);
    expect(r.violations[0].message).toContain('1 ns');
  });

  it('reports a hold nested inside a long hold, even after a short one in between', () => {
    const r = checkHistory([
      ...hold('w1', 'long', 1, 0n, 100n),
      ...hold('w2', 'short', 2, 10n, 20n),
      ...hold('w3', 'late', 3, 50n, 60n),
    ]);
    expect(r.violations.map((v) => v.holds.map((h) => h.token))).toEqual([
      ['long', 'short'],
      ['long', 'late'],
    ]);
  });

  it('is independent of event order', () => {
    const events = [...hold('w1', 'a', 1, 10n, 20n), ...hold('w2', 'b', 2, 19n, 30n)].reverse();
    expect(kinds(checkHistory(events).violations)).toEqual(['overlap']);
  });

  it('reports a crashed holder (no rel, no lost) overlapping any later hold by default', () => {
    const r = checkHistory([acq('w1', 'a', 1, 10n), ...hold('w2', 'b', 2, 1_000_000n, 1_000_010n)]);
    expect(kinds(r.violations)).toEqual(['overlap']);
    expect(r.violations[0].holds[0]).toMatchObject({
      token: 'a',
      endedBy: 'open',
      end: 'infinity',
    });
    expect(r.openHolds).toBe(1);
  });

  it('bounds a crashed hold by openHoldEnd: a grant after the lease end is fine, before is not', () => {
    const events = [acq('w1', 'a', 1, 10n), ...hold('w2', 'b', 2, 500n, 600n)];
    expect(checkHistory(events, { openHoldEnd: 400n }).violations).toEqual([]);
    expect(checkHistory(events, { openHoldEnd: 500n }).violations).toEqual([]);
    expect(kinds(checkHistory(events, { openHoldEnd: 501n }).violations)).toEqual(['overlap']);

    // Per hold: exit time of the dead worker + ttl.
    const exitAt = new Map([['w1', 300n]]);
    const ttl = 150n;
    const perHold = (h: { worker: string }): bigint | 'infinity' => {
      const exit = exitAt.get(h.worker);
      return exit === undefined ? 'infinity' : exit + ttl;
    };
    expect(checkHistory(events, { openHoldEnd: perHold }).violations).toEqual([]);
    exitAt.set('w1', 400n);
    expect(kinds(checkHistory(events, { openHoldEnd: perHold }).violations)).toEqual(['overlap']);
  });

  it('reports a grant that came before the previous holder learned it lost the lock', () => {
    const r = checkHistory([
      acq('w1', 'a', 1, 10n),
      lost('w1', 'a', 50n),
      ...hold('w2', 'b', 2, 40n, 60n),
    ]);
    expect(kinds(r.violations)).toEqual(['overlap']);
  });

  it('reports duplicate fences on one key, even without overlap', () => {
    const r = checkHistory([
      ...hold('w1', 'a', 5, 10n, 20n),
      ...hold('w2', 'b', 6, 30n, 40n),
      ...hold('w3', 'c', 5, 50n, 60n),
    ]);
    // 5 after 6 is also a decrease; the duplicate 5 is reported once as a duplicate.
    expect(kinds(r.violations)).toEqual(['fence-duplicate', 'fence-order']);
    const dup = r.violations.find((v) => v.kind === 'fence-duplicate');
    expect(dup?.holds.map((h) => h.token)).toEqual(['a', 'c']);
  });

  it('reports adjacent equal fences only as a duplicate', () => {
    const r = checkHistory([...hold('w1', 'a', 5, 10n, 20n), ...hold('w2', 'b', 5, 30n, 40n)]);
    expect(kinds(r.violations)).toEqual(['fence-duplicate']);
  });

  it('reports fences that go down in grant order', () => {
    const r = checkHistory([...hold('w1', 'a', 7, 10n, 20n), ...hold('w2', 'b', 6, 30n, 40n)]);
    expect(kinds(r.violations)).toEqual(['fence-order']);
    expect(r.violations[0].holds.map((h) => h.fence)).toEqual([7, 6]);
  });

  it('compares fences across null-fenced holds in between', () => {
    const r = checkHistory([
      ...hold('w1', 'a', 7, 10n, 20n),
      ...hold('w2', 'b', null, 30n, 40n),
      ...hold('w3', 'c', 3, 50n, 60n),
    ]);
    expect(kinds(r.violations)).toEqual(['fence-order']);
  });

  it('reports a lost update: two critical sections read the same value', () => {
    const r = checkHistory(
      [
        ...hold('w1', 'a', 1, 10n, 20n),
        witness('w1', 'a', 0, 19n),
        ...hold('w2', 'b', 2, 30n, 40n),
        witness('w2', 'b', 0, 39n),
      ],
      { witnessFinal: { k: 1 } },
    );
    // Both the duplicate read and the final count (1 != 2) are reported.
    expect(kinds(r.violations)).toEqual(['lost-update', 'lost-update']);
    expect(r.criticalSections).toBe(2);
    expect(r.violations[0].events).toHaveLength(2);
  });

  it('reports a lost update from the final value alone', () => {
    const events = [
      ...hold('w1', 'a', 1, 10n, 20n),
      witness('w1', 'a', 0, 19n),
      ...hold('w2', 'b', 2, 30n, 40n),
      witness('w2', 'b', 1, 39n),
    ];
    expect(kinds(checkHistory(events, { witnessFinal: new Map([['k', 1]]) }).violations)).toEqual([
      'lost-update',
    ]);
    // With a non-zero starting value: 10 + 2 sections must end at 12.
    const from10 = { witnessInitial: 10 };
    const short = checkHistory(events, { ...from10, witnessFinal: { k: 11 } }).violations;
    expect(kinds(short)).toEqual(['lost-update']);
    expect(short[0].message).toContain('expected 12');
    expect(checkHistory(events, { ...from10, witnessFinal: { k: 12 } }).violations).toEqual([]);
    expect(checkHistory(events, { witnessFinal: { k: 2 } }).violations).toEqual([]);
  });

  it('reports more increments than critical sections unless an open hold can explain one', () => {
    const clean = [...hold('w1', 'a', 1, 10n, 20n), witness('w1', 'a', 0, 19n)];
    expect(kinds(checkHistory(clean, { witnessFinal: { k: 2 } }).violations)).toEqual([
      'lost-update',
    ]);
    // w2 wrote 2 then was killed before recording its witness line; its lease ended at 100.
    const crashed = [...clean, acq('w2', 'b', 2, 30n)];
    expect(checkHistory(crashed, { witnessFinal: { k: 2 }, openHoldEnd: 100n }).violations).toEqual(
      [],
    );
    expect(
      kinds(checkHistory(crashed, { witnessFinal: { k: 3 }, openHoldEnd: 100n }).violations),
    ).toEqual(['lost-update']);
  });

  it('reports a witness key absent from the history whose counter moved', () => {
    expect(kinds(checkHistory([], { witnessFinal: { k: 1 } }).violations)).toEqual(['lost-update']);
  });

  it('reports malformed histories', () => {
    const r = checkHistory([
      rel('w1', 'nope', 10n),
      lost('w1', 'nope', 11n),
      witness('w1', 'nope', 0, 12n),
      ...hold('w2', 'b', 1, 20n, 30n),
      acq('w2', 'b', 1, 25n),
      witness('w2', 'b', 4, 28n, 'k', 6),
      acq('w3', 'c', 2, 50n),
      rel('w3', 'c', 40n),
    ]);
    expect(kinds(r.violations)).toEqual(Array(6).fill('malformed'));
    expect(r.violations.map((v) => v.message).join('\n')).toMatch(/rel without acq/);
    expect(r.holds).toBe(2);
  });
});

describe('checkHistory passes clean histories', () => {
  it('allows back-to-back holds, including a start equal to the previous end', () => {
    const r = checkHistory([
      ...hold('w1', 'a', 1, 10n, 20n),
      ...hold('w2', 'b', 2, 20n, 30n),
      ...hold('w1', 'c', 3, 31n, 40n),
    ]);
    expect(r.violations).toEqual([]);
    expect(r.holds).toBe(3);
    expect(r.keys).toBe(1);
    expect(r.intervals.map((h) => h.token)).toEqual(['a', 'b', 'c']);
  });

  it('lets holds of different keys overlap freely', () => {
    const r = checkHistory([
      ...hold('w1', 'a', 1, 10n, 50n, 'x'),
      ...hold('w2', 'b', 1, 20n, 60n, 'y'),
      ...hold('w1', 'a', 1, 10n, 50n, 'z'), // multi-key lock: same token, fence per key
    ]);
    expect(r.violations).toEqual([]);
    expect(r.keys).toBe(3);
  });

  it('ignores null fences for fence checks', () => {
    const r = checkHistory([
      ...hold('w1', 'a', null, 10n, 20n),
      ...hold('w2', 'b', null, 30n, 40n),
      ...hold('w1', 'c', 4, 50n, 60n),
      ...hold('w2', 'd', null, 70n, 80n),
      ...hold('w1', 'e', 9, 90n, 100n),
    ]);
    expect(r.violations).toEqual([]);
  });

  it('accepts a lost lock reacquired afterwards, with rel after lost', () => {
    const r = checkHistory(
      [
        acq('w1', 'a', 1, 10n),
        lost('w1', 'a', 20n),
        rel('w1', 'a', 25n), // the finally block still releases; the hold ended at `lost`
        ...hold('w2', 'b', 2, 21n, 30n),
        witness('w2', 'b', 0, 29n),
        ...hold('w1', 'c', 3, 31n, 40n),
        witness('w1', 'c', 1, 39n),
      ],
      { witnessFinal: { k: 2 } },
    );
    expect(r.violations).toEqual([]);
    expect(r.intervals[0]).toMatchObject({ token: 'a', end: 20n, endedBy: 'lost' });
    expect(r.criticalSections).toBe(2);
  });

  it('accepts an empty history', () => {
    expect(checkHistory([])).toMatchObject({
      violations: [],
      holds: 0,
      keys: 0,
      criticalSections: 0,
    });
  });
});

describe('HistoryRecorder and readHistory', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lock-history-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    expect(existsSync(dir)).toBe(false);
  });

  /** Deterministic clock shared by recorders, standing in for the system-wide monotonic clock. */
  const clock = (): (() => bigint) => {
    let t = 1_000_000_000_000n;
    return () => (t += 10n);
  };

  it('round-trips through files, tolerating a truncated last line', () => {
    const now = clock();
    const f1 = join(dir, 'w1.jsonl');
    const f2 = join(dir, 'w2.jsonl');
    const r1 = new HistoryRecorder(f1, 'w1', { now });
    const r2 = new HistoryRecorder(f2, 'w2', { now });

    const t0 = r1.acq('k', 'tok-a', 1);
    r1.witness('k', 'tok-a', 0, 1);
    r1.rel('k', 'tok-a');
    r2.acq('k', 'tok-b', 2);
    r2.lost('k', 'tok-b', 'renewal refused');
    r2.rel('k', 'tok-b');
    r1.acq('k', 'tok-c', 3);
    r1.witness('k', 'tok-c', 1, 2);
    // w1 killed mid-write of its `rel`:
    appendFileSync(f1, '{"worker":"w1","key":"k","token":"tok-c","ev":"re');
    r1.close();
    r1.close(); // idempotent
    r2.close();
    expect(() => r1.rel('k', 'tok-c')).toThrow(/closed/);

    const first: unknown = JSON.parse(readFileSync(f1, 'utf8').split('\n')[0]);
    expect(first).toEqual({
      worker: 'w1',
      key: 'k',
      token: 'tok-a',
      fence: 1,
      ev: 'acq',
      t: `${t0}`,
    });
    expect(parseHistory(readFileSync(f1, 'utf8'), f1).truncated).toBe(true);
    expect(parseHistory(readFileSync(f2, 'utf8'), f2).truncated).toBe(false);

    const events = readHistory([f1, f2]);
    expect(events.map((e) => `${e.worker}:${e.ev}`)).toEqual([
      'w1:acq',
      'w1:witness',
      'w1:rel',
      'w2:acq',
      'w2:lost',
      'w2:rel',
      'w1:acq',
      'w1:witness',
    ]);
    expect(events[0]).toMatchObject({ t: t0, at: `${f1}:1` });
    expect(events[4]).toMatchObject({ ev: 'lost', reason: 'renewal refused' });

    const r = checkHistory(events, { witnessFinal: { k: 2 } });
    expect(r.violations).toEqual([]);
    expect(r).toMatchObject({ holds: 3, openHolds: 1, criticalSections: 2 });
  });

  it('records real monotonic nanoseconds by default', () => {
    const f = join(dir, 'w.jsonl');
    const rec = new HistoryRecorder(f, 'w');
    rec.acq('k', 't', null);
    rec.rel('k', 't');
    rec.close();
    const [a, b] = readHistory([f]);
    expect(typeof a.t).toBe('bigint');
    expect(b.t).toBeGreaterThanOrEqual(a.t);
    expect(checkHistory([a, b]).violations).toEqual([]);
  });

  it('catches an overlap between two real recorder files', () => {
    const now = clock();
    const f1 = join(dir, 'w1.jsonl');
    const f2 = join(dir, 'w2.jsonl');
    const r1 = new HistoryRecorder(f1, 'w1', { now });
    const r2 = new HistoryRecorder(f2, 'w2', { now });
    r1.acq('k', 'a', 1);
    r2.acq('k', 'b', 2);
    r1.rel('k', 'a');
    r2.rel('k', 'b');
    r1.close();
    r2.close();
    expect(kinds(checkHistory(readHistory([f1, f2])).violations)).toEqual(['overlap']);
  });

  it('keeps an unterminated last line that is complete, and skips blank lines', () => {
    const line = '{"worker":"w","key":"k","token":"t","fence":null,"ev":"acq","t":"5"}';
    const parsed = parseHistory(`\n${line}`, 'f');
    expect(parsed.truncated).toBe(false);
    expect(parsed.events).toEqual([
      { worker: 'w', key: 'k', token: 't', fence: null, ev: 'acq', t: 5n, at: 'f:2' },
    ]);
  });

  it('throws on a corrupt line that is not the last one', () => {
    const f = join(dir, 'bad.jsonl');
    appendFileSync(
      f,
      '{"worker":"w","key":"k","tok\n{"worker":"w","key":"k","token":"t","ev":"rel","t":"9"}\n',
    );
    expect(() => readHistory([f])).toThrow(HistoryParseError);
    expect(() => readHistory([f])).toThrow(`${f}:1`);
  });

  it('rejects lines that are JSON but not events', () => {
    const ok = { worker: 'w', key: 'k', token: 't', ev: 'rel', t: '9' };
    const bad: Record<string, unknown>[] = [
      { ...ok, ev: 'release' },
      { ...ok, t: 9 },
      { ...ok, t: '-9' },
      { ...ok, worker: 1 },
      { ...ok, ev: 'acq' }, // fence missing
      { ...ok, ev: 'witness', read: 1 }, // wrote missing
    ];
    for (const line of bad) {
      expect(() => parseHistory(`${JSON.stringify(line)}\n`)).toThrow(HistoryParseError);
    }
    expect(() => parseHistory('[1]\n')).toThrow(/not a JSON object/);
  });
});
