import type { WakeSource } from '../../core/shared/wake-up';
import type { ZkSession } from './zk-session';

/** A watch a queued waiter sleeps on: a node ahead of it, or (a counted lock's head) the queue. */
export interface ZkWatch {
  /** The watched node (or, for a queue watch, the key node). */
  readonly path: string;
  /** The session generation it was armed in: a replaced session's watches never fire. */
  readonly generation: number;
  fired: boolean;
  /** Wakes its sleepers when the watch fires (at once if it already has). */
  readonly source: WakeSource;
}

/**
 * The watches of one backend's queued waiters. A node watch is shared by every waiter of this
 * process that waits on that node (the readers behind one writer): one request and one client
 * watcher per node, not one per reader (the client keeps every watcher it is given, and warns
 * past ten on one path). A waiter asks again after its watch fired; until then it gets the same
 * one, so waking up for another reason (session trouble) arms nothing new.
 */
export class ZkWatches {
  private readonly nodes = new Map<string, ZkWatch>();
  private generation = 0;

  constructor(private readonly session: ZkSession) {}

  /**
   * The watch on `path`: fires when the node is deleted or its data changes, or at once if it
   * is already gone or the watch could not be armed (the queue is read again then).
   * `admittedWakes`: the node is a counted lock's, written once when admitted, which is news
   * to its follower; already written, the watch fires at once too. Only then: a node that
   * keeps its follower out must not wake it over and over.
   */
  node(path: string, admittedWakes: boolean): ZkWatch {
    const generation = this.session.generation;
    if (generation !== this.generation) {
      // The old client's watches never fire: forget them all.
      this.nodes.clear();
      this.generation = generation;
    }
    // Apart by flag: one armed without the check would hide an admission already written.
    const slot = `${admittedWakes ? 'a' : 'd'}${path}`;
    const live = this.nodes.get(slot);
    if (live && !live.fired) return live;
    const [watch, fire] = newWatch(path, generation, () => {
      if (this.nodes.get(slot) === watch) this.nodes.delete(slot);
    });
    this.nodes.set(slot, watch);
    this.session.watchNode(path, fire).then((stat) => {
      if (admittedWakes && (stat?.version ?? 0) > 0) fire();
    }, fire);
    return watch;
  }

  /**
   * A watch on the children of `dir` (one waiter's, not shared): fires at their next change, or
   * at once when the read that arms it shows `stillWaiting` false (the queue moved before the
   * watch was armed) or could not be made.
   */
  children(dir: string, stillWaiting: (children: readonly string[]) => boolean): ZkWatch {
    const [watch, fire] = newWatch(dir, this.session.generation, () => undefined);
    this.session.watchChildren(dir, fire).then((children) => {
      if (!stillWaiting(children)) fire();
    }, fire);
    return watch;
  }
}

/** A watch and the function that fires it (once), then `onFire`. */
function newWatch(path: string, generation: number, onFire: () => void): [ZkWatch, () => void] {
  const sleepers = new Set<() => void>();
  const watch: ZkWatch = {
    path,
    generation,
    fired: false,
    source: (wake) => {
      if (watch.fired) wake();
      else sleepers.add(wake);
      return () => sleepers.delete(wake);
    },
  };
  const fire = (): void => {
    if (watch.fired) return;
    watch.fired = true;
    onFire();
    for (const wake of [...sleepers]) wake();
  };
  return [watch, fire];
}
