import { describe, expect, it } from '@jest/globals';
import { sortLockNodes } from './zk-paths';
import { placeInQueue } from './zk-queue';

/** A lock node name as ZooKeeper makes it: the protected prefix, then a 10-digit sequence. */
const node = (token: string, seq: number) => `_c_${token}-lock-${String(seq).padStart(10, '0')}`;

describe('lock node queue order', () => {
  // Tokens sort in another order than sequences: the queue goes by sequence only.
  const children = [node('zz', 7), 'not-a-lock', node('aa', 12), node('mm', 3), '_c_x-lock-12'];

  it('sortLockNodes keeps the lock nodes, by sequence', () => {
    expect(sortLockNodes(children)).toEqual([node('mm', 3), node('zz', 7), node('aa', 12)]);
  });

  it('placeInQueue: the lowest holds; any other is behind the next lower sequence', () => {
    expect(placeInQueue(children, node('mm', 3))).toEqual({ kind: 'first' });
    expect(placeInQueue(children, node('zz', 7))).toEqual({
      kind: 'behind',
      predecessor: node('mm', 3),
    });
    expect(placeInQueue(children, node('aa', 12))).toEqual({
      kind: 'behind',
      predecessor: node('zz', 7),
    });
  });

  it('placeInQueue: a node missing from the queue is gone, whatever its sequence', () => {
    expect(placeInQueue(children, node('qq', 1))).toEqual({ kind: 'gone' });
    expect(placeInQueue(children, node('qq', 9))).toEqual({ kind: 'gone' });
    expect(placeInQueue([], node('qq', 9))).toEqual({ kind: 'gone' });
  });

  it('placeInQueue agrees with the sorted queue on a long shuffled one', () => {
    const names = Array.from({ length: 500 }, (_, i) => node(`t${(i * 7919) % 500}`, i * 3 + 1));
    const shuffled = [...names].sort(
      (a, b) => a.charCodeAt(4) - b.charCodeAt(4) || (a < b ? 1 : -1),
    );
    const sorted = sortLockNodes(shuffled);
    expect(sorted).toEqual(names);
    sorted.forEach((name, i) => {
      expect(placeInQueue(shuffled, name)).toEqual(
        i === 0 ? { kind: 'first' } : { kind: 'behind', predecessor: sorted[i - 1] },
      );
    });
  });
});
