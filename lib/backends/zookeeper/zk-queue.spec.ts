import { describe, expect, it } from '@jest/globals';
import {
  kindOf,
  kindOfRequest,
  MUTEX,
  nodePrefix,
  READER,
  slotsIn,
  sortLockNodes,
} from './zk-paths';
import { placeInQueue, queueView } from './zk-queue';

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

/** A node of any kind: `lock`, `read` or `sem<N>`. */
const named = (token: string, kind: string, seq: number) =>
  `_c_${token}-${kind}-${String(seq).padStart(10, '0')}`;

describe('node kinds', () => {
  it('reads the kind from the name; an unknown lock node counts as a mutex', () => {
    expect(kindOf(named('a', 'lock', 1))).toBe(MUTEX);
    expect(kindOf(named('a', 'read', 1))).toBe(READER);
    expect(kindOf(named('a-read', 'sem12', 1))).toEqual({ shared: false, permits: 12 });
    expect(kindOf('_c_0f3a-__READ__0000000001')).toBe(MUTEX);
    expect(kindOf(named('a', 'sem1', 1))).toBe(MUTEX);
    expect(kindOf('slot-3')).toBeUndefined();
    expect(nodePrefix('t', kindOfRequest('shared'))).toBe('_c_t-read-');
    expect(nodePrefix('t', kindOfRequest('exclusive', 5))).toBe('_c_t-sem5-');
    expect(nodePrefix('t', kindOfRequest(undefined))).toBe('_c_t-lock-');
  });

  it('slot nodes are told apart and listed ascending', () => {
    expect(slotsIn(['slot-2', named('a', 'sem3', 1), 'slot-0', 'slot-x'])).toEqual([0, 2]);
  });
});

describe('shared and counted places', () => {
  it('a reader holds with readers ahead and waits for the nearest writer ahead', () => {
    const q = [
      named('r1', 'read', 1),
      named('r2', 'read', 2),
      named('w1', 'lock', 3),
      named('r3', 'read', 4),
      named('r4', 'read', 5),
      named('w2', 'lock', 6),
      named('r5', 'read', 7),
    ];
    expect(placeInQueue(q, q[1])).toEqual({ kind: 'first' });
    // A writer waits for its immediate predecessor, reader or not.
    expect(placeInQueue(q, q[2])).toEqual({ kind: 'behind', predecessor: q[1] });
    expect(placeInQueue(q, q[4])).toEqual({ kind: 'behind', predecessor: q[2] });
    expect(placeInQueue(q, q[5])).toEqual({ kind: 'behind', predecessor: q[4] });
    expect(placeInQueue(q, q[6])).toEqual({ kind: 'behind', predecessor: q[5] });
  });

  it('a counted lock admits the first N; the next is the head; the others wait on the one ahead', () => {
    const q = [0, 1, 2, 3, 4].map((i) => named(`s${i}`, 'sem2', 10 + i));
    expect(placeInQueue(q, q[0])).toEqual({ kind: 'first' });
    expect(placeInQueue(q, q[1])).toEqual({ kind: 'first' });
    expect(placeInQueue(q, q[2])).toEqual({ kind: 'head' });
    expect(placeInQueue(q, q[3])).toEqual({ kind: 'behind', predecessor: q[2] });
    expect(placeInQueue(q, q[4])).toEqual({ kind: 'behind', predecessor: q[3] });
  });

  it('the lowest node sets the permits: one that disagrees is refused, and holds back those behind it until it leaves', () => {
    const q = [
      named('a', 'sem3', 1),
      named('b', 'lock', 2),
      named('c', 'sem3', 3),
      named('d', 'read', 4),
      named('e', 'sem3', 5),
    ];
    expect(placeInQueue(q, q[1])).toEqual({ kind: 'refused', permits: 3 });
    expect(placeInQueue(q, q[3])).toEqual({ kind: 'refused', permits: 3 });
    // c and e wait for the nearest refused node ahead to leave: it could become the lowest
    // (a left before it read the queue) and hold, so nothing behind it is admitted meanwhile.
    expect(placeInQueue(q, q[2])).toEqual({ kind: 'behind', predecessor: q[1] });
    expect(placeInQueue(q, q[4])).toEqual({ kind: 'behind', predecessor: q[3] });
    // Once they left, the refused nodes are not counted ahead: two agreeing ahead of 3 permits.
    const left = [q[0], q[2], q[4]];
    expect(placeInQueue(left, q[4])).toEqual({ kind: 'first' });
    // A mutex first sets permits 1 for those behind; a mutex waits for its predecessor, any.
    const m = [named('m', 'lock', 1), named('s', 'sem2', 2), named('n', 'lock', 3)];
    expect(placeInQueue(m, m[1])).toEqual({ kind: 'refused', permits: 1 });
    expect(placeInQueue(m, m[2])).toEqual({ kind: 'behind', predecessor: m[1] });
    // A reader waits for a refused counted node ahead as for a writer.
    const r = [named('r1', 'read', 1), named('s', 'sem2', 2), named('r2', 'read', 3)];
    expect(placeInQueue(r, r[2])).toEqual({ kind: 'behind', predecessor: r[1] });
    // The race this prevents: a refused mutex that became the lowest holds; the counted
    // request behind it, admitted by the old lowest, must not hold beside it.
    const race = [named('x', 'lock', 2), named('s2', 'sem2', 3)];
    expect(placeInQueue(race, race[0])).toEqual({ kind: 'first' });
    expect(placeInQueue(race, race[1])).toEqual({ kind: 'refused', permits: 1 });
  });

  it('queueView: the holders and the waiters of each kind of queue', () => {
    const readers = [named('r1', 'read', 1), named('r2', 'read', 2), named('w', 'lock', 3)];
    expect(queueView(readers)).toEqual({
      permits: 1,
      mode: 'shared',
      holders: readers.slice(0, 2),
      waiting: 1,
    });
    const writer = [named('w', 'lock', 1), named('r', 'read', 2)];
    expect(queueView(writer)).toEqual({
      permits: 1,
      mode: 'exclusive',
      holders: writer.slice(0, 1),
      waiting: 1,
    });
    const sem = [1, 2, 3, 4].map((i) => named(`s${i}`, 'sem3', i * 2));
    expect(queueView(sem)).toEqual({
      permits: 3,
      mode: 'exclusive',
      holders: sem.slice(0, 3),
      waiting: 1,
    });
    // A disagreeing node (a lock, leaving) is neither, but holds back what is behind it.
    sem.splice(1, 0, named('x', 'lock', 3));
    expect(queueView(sem)).toMatchObject({ holders: sem.slice(0, 1), waiting: 3 });
  });
});
