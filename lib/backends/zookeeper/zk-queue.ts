import { kindOf, sequenceOf, type NodeKind } from './zk-paths';

/**
 * Where one lock node stands in its key's queue:
 * - `first`: it holds (a mutex or writer first in line, a reader with no writer ahead, a
 *   request of a counted lock with fewer than `permits` ahead of it);
 * - `behind` another: the node to watch (deletion, or for a counted lock a data change that
 *   says it was admitted);
 * - `head`: a counted lock's first waiter (exactly `permits` ahead of it), admitted when any of
 *   those leaves: it watches the key's children;
 * - `refused`: the key's queue agreed on other `permits` (the count of its lowest node);
 * - `gone`: not in the queue (its session was replaced, or it was deleted).
 */
export type QueuePlace =
  | { readonly kind: 'first' }
  | { readonly kind: 'behind'; readonly predecessor: string }
  | { readonly kind: 'head' }
  | { readonly kind: 'refused'; readonly permits: number }
  | { readonly kind: 'gone' };

/**
 * Where `own` stands among `children` (in any order), in one pass and without sorting: a
 * waiter needs only the node it waits on, and it reads the queue on every wake-up, so a sort
 * per read would cost n log n per hand-off where n is all that is needed.
 *
 * The lowest node sets the key's `permits`; a node asking another count is refused, and the
 * others ignore it (it leaves at once), so a request that disagrees is never admitted beside
 * holders that agree, and never holds them up. Among the nodes that agree: a writer (mutex)
 * waits for its immediate predecessor, a reader for the nearest writer ahead (so a waiting
 * writer holds back the readers behind it: writer preference, FIFO otherwise), a request of a
 * counted lock for fewer than `permits` ahead of it (Curator's semaphore, in one queue).
 */
export function placeInQueue(children: readonly string[], own: string): QueuePlace {
  const mine = kindOf(own);
  if (mine === undefined) return { kind: 'gone' };
  const ownSeq = sequenceOf(own);
  let present = false;
  let lowestSeq = ownSeq;
  let lowest: NodeKind = mine;
  let predecessor: string | undefined;
  let predecessorSeq = -1;
  let ahead = 0;
  for (const name of children) {
    if (name === own) {
      present = true;
      continue;
    }
    const kind = kindOf(name);
    if (kind === undefined) continue;
    const seq = sequenceOf(name);
    if (seq >= ownSeq) continue;
    if (seq < lowestSeq) {
      lowestSeq = seq;
      lowest = kind;
    }
    if (kind.permits !== mine.permits) continue;
    ahead++;
    if (mine.shared && kind.shared) continue; // readers pass readers
    if (seq > predecessorSeq) {
      predecessor = name;
      predecessorSeq = seq;
    }
  }
  if (!present) return { kind: 'gone' };
  if (lowest.permits !== mine.permits) return { kind: 'refused', permits: lowest.permits };
  if (mine.permits === 1) {
    return predecessor === undefined ? { kind: 'first' } : { kind: 'behind', predecessor };
  }
  if (ahead < mine.permits) return { kind: 'first' };
  if (ahead === mine.permits) return { kind: 'head' };
  return { kind: 'behind', predecessor: predecessor! };
}

/** Who holds a key and who waits, as one sorted queue shows it (see `queueView`). */
export interface QueueView {
  /** `permits` of the queue (its lowest node's). */
  readonly permits: number;
  /** Mode of the holders. */
  readonly mode: 'exclusive' | 'shared';
  /**
   * The holders' nodes: the first (a writer), the readers before the first writer, or for a
   * counted lock the first `permits` (admitted; each holds a slot node once it claimed it).
   */
  readonly holders: readonly string[];
  /** Nodes that agree on `permits` and wait behind the holders. */
  readonly waiting: number;
}

/**
 * The holders and waiters of a non-empty queue (lock nodes in queue order), by the rules of
 * `placeInQueue`: nodes asking other `permits` than the lowest are left out (they leave).
 */
export function queueView(queue: readonly string[]): QueueView {
  const first = kindOf(queue[0])!;
  const agreeing = queue.filter((name) => kindOf(name)?.permits === first.permits);
  let held: number;
  if (first.permits > 1) held = Math.min(first.permits, agreeing.length);
  else if (!first.shared) held = 1;
  else {
    held = agreeing.findIndex((name) => !kindOf(name)!.shared);
    if (held < 0) held = agreeing.length;
  }
  return {
    permits: first.permits,
    mode: first.shared ? 'shared' : 'exclusive',
    holders: agreeing.slice(0, held),
    waiting: agreeing.length - held,
  };
}
