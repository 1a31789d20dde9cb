/**
 * The sharing rows' checker on hand-built histories: it passes what a correct counted or shared
 * lock does, and finds each way a broken one over-admits (a third holder of two slots, a slot
 * handed out twice, a writer beside a reader, a reader beside a writer), and fences that repeat
 * or fall.
 */
import { describe, expect, it } from '@jest/globals';
import { checkAdmission, type AdmittedHold } from './admission-check';

let fence = 0;
/** A hold from `start` to `end` (ms, made ns). */
function hold(
  worker: string,
  mode: AdmittedHold['mode'],
  permits: number,
  permit: number,
  start: number,
  end: number,
  f = ++fence,
): AdmittedHold {
  const ns = (ms: number): bigint => BigInt(ms) * 1_000_000n;
  return {
    worker,
    token: `${worker}-${f}`,
    mode,
    permits,
    permit,
    fence: f,
    start: ns(start),
    end: ns(end),
  };
}
const slot = (worker: string, permit: number, start: number, end: number, f?: number) =>
  hold(worker, 'exclusive', 2, permit, start, end, f);

describe('checkAdmission', () => {
  it('passes two slots used at once, each handed over at the instant it is freed', () => {
    const check = checkAdmission([
      slot('a', 0, 0, 10),
      slot('b', 1, 5, 20),
      slot('c', 0, 10, 30), // a's slot, granted the instant a let it go
      slot('a', 1, 20, 40),
    ]);
    expect(check).toMatchObject({ overAdmissions: 0, slotViolations: 0, fenceViolations: 0 });
    expect(check.maxHolders).toBe(2);
  });

  it('finds a third holder of two slots, and a slot held twice', () => {
    const third = checkAdmission([slot('a', 0, 0, 10), slot('b', 1, 0, 10), slot('c', 1, 5, 8)]);
    expect(third.overAdmissions).toBe(1);
    expect(third.slotViolations).toBe(1);
    expect(third.maxHolders).toBe(3);
    const twice = checkAdmission([slot('a', 0, 0, 10), slot('b', 0, 5, 20)]);
    expect(twice).toMatchObject({ overAdmissions: 0, slotViolations: 1 });
    expect(twice.findings[0]).toContain('slot also held by a');
    expect(checkAdmission([slot('a', 2, 0, 10)]).slotViolations).toBe(1);
  });

  it('passes readers together and a writer alone, and finds a writer beside a reader either way', () => {
    const ok = checkAdmission([
      hold('r1', 'shared', 1, 0, 0, 10),
      hold('r2', 'shared', 1, 0, 2, 12),
      hold('w', 'exclusive', 1, 0, 12, 20),
      hold('r1', 'shared', 1, 0, 20, 25),
    ]);
    expect(ok).toMatchObject({ overAdmissions: 0, slotViolations: 0, fenceViolations: 0 });
    const writerLate = checkAdmission([
      hold('r', 'shared', 1, 0, 0, 10),
      hold('w', 'exclusive', 1, 0, 9, 20),
    ]);
    expect(writerLate.overAdmissions).toBe(1);
    const readerLate = checkAdmission([
      hold('w', 'exclusive', 1, 0, 0, 10),
      hold('r', 'shared', 1, 0, 9, 20),
    ]);
    expect(readerLate.overAdmissions).toBe(1);
    expect(readerLate.findings[0]).toContain('r shared fence');
  });

  it('finds fences that repeat, and a writer’s fence below one granted before it', () => {
    expect(checkAdmission([slot('a', 0, 0, 10, 7), slot('b', 1, 0, 10, 7)]).fenceViolations).toBe(
      1,
    );
    const falling = checkAdmission([
      hold('w1', 'exclusive', 1, 0, 0, 10, 9),
      hold('w2', 'exclusive', 1, 0, 11, 20, 8),
    ]);
    expect(falling.fenceViolations).toBe(1);
    expect(falling.overAdmissions).toBe(0);
  });
});
