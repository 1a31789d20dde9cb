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
 * A mutex (or writer) holds when no node is ahead of it and waits for its immediate
 * predecessor, whatever that is (Curator's mutex, unchanged); a reader holds when no other
 * kind of node is ahead of it and waits for the nearest such (so a waiting writer holds back
 * the readers behind it: writer preference, FIFO otherwise); a request of a counted lock holds
 * when fewer than `permits` are ahead of it (Curator's semaphore, in one queue).
 *
 * The lowest node sets the key's `permits`: a node asking another count is refused (it leaves
 * at once). Until it has left it still blocks every node behind it as a writer would: it may
 * become the lowest (the holders ahead of it leaving before it read the queue) and then hold,
 * so nothing behind it that disagrees may be admitted meanwhile. Holders of two counts (a
 * mutex beside a counted lock's holder) can therefore never meet, whatever the timing; a
 * request can only be refused, or wait a round trip longer.
 */
export function placeInQueue(children: readonly string[], own: string): QueuePlace {
  const mine = kindOf(own);
  if (mine === undefined) return { kind: 'gone' };
  const ownSeq = sequenceOf(own);
  let present = false;
  let lowestSeq = ownSeq;
  let lowest: NodeKind = mine;
  /** The node to wait on: the nearest ahead that keeps us out (see above). */
  let predecessor: string | undefined;
  let predecessorSeq = -1;
  /** The nearest node ahead asking other `permits` (a counted lock's blocker). */
  let blocker: string | undefined;
  let blockerSeq = -1;
  /** Nodes ahead that agree on `permits` (a counted lock's count). */
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
    if (kind.permits === mine.permits) ahead++;
    else if (seq > blockerSeq) {
      blocker = name;
      blockerSeq = seq;
    }
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
  if (blocker !== undefined) return { kind: 'behind', predecessor: blocker };
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
 * `placeInQueue`: nodes asking other `permits` than the lowest are neither (they leave), but
 * hold back what is behind them.
 */
export function queueView(queue: readonly string[]): QueueView {
  const first = kindOf(queue[0])!;
  const kinds = queue.map((name) => kindOf(name)!);
  const agreeing = queue.filter((_, i) => kinds[i].permits === first.permits);
  let held = kinds.findIndex((kind) => kind.permits !== first.permits);
  if (held < 0) held = queue.length;
  if (first.permits > 1) held = Math.min(first.permits, held);
  else if (!first.shared) held = 1;
  else {
    const writer = kinds.findIndex((kind) => !kind.shared);
    if (writer >= 0) held = Math.min(held, writer);
  }
  return {
    permits: first.permits,
    mode: first.shared ? 'shared' : 'exclusive',
    holders: queue.slice(0, held),
    waiting: agreeing.length - held,
  };
}
