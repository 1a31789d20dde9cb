import { MAX_TIMER_MS } from '../../core/shared/timers';

/** A caller's place at the head of a key's line (see {@link KeyWaitLines.join}). */
export interface LinePlace {
  /**
   * Whether this head is waiting inside the database right now: `inspect` counts the database's
   * queue and, besides it, the callers of this process waiting here.
   */
  inDatabase: boolean;
  /** Leaves the line: the next caller becomes its head. Idempotent. */
  leave(): void;
}

/** One caller in a line. */
interface Entry extends LinePlace {
  /** Set while the caller waits behind others: makes it the head. */
  promote?: () => void;
  /** Set while the caller waits behind others: it gives up (resolves `null`). */
  giveUp?: () => void;
}

/**
 * The waiters of this process, one FIFO line per key. Only a line's head waits for the lock in
 * the store (in the database's lock queue, on a connection of its own, or by trying and being
 * woken); the callers behind it wait here, in process, at no cost to the pool or the database,
 * and move up when the head gets the lock or gives up. So a key that 50 callers of a process
 * wait for costs one waiting connection, not 50, and one take per wake-up, not 50; within a
 * process the lock goes in arrival order, and between processes the store decides as before.
 */
export class KeyWaitLines {
  private readonly lines = new Map<string, Entry[]>();
  private closed = false;

  /**
   * Joins the line of `key`: resolves the caller's place as soon as it is the head (at once when
   * the line is empty), or `null` when `waitMs` passes, `signal` aborts or the lines close first
   * (the caller has then left the line). A head must `leave()` when it is done waiting.
   */
  join(key: string, waitMs: number, signal: AbortSignal): Promise<LinePlace | null> {
    if (this.closed || signal.aborted || waitMs <= 0) return Promise.resolve(null);
    let line = this.lines.get(key);
    if (!line) {
      line = [];
      this.lines.set(key, line);
    }
    let left = false;
    const entry: Entry = {
      inDatabase: false,
      leave: () => {
        if (left) return;
        left = true;
        this.remove(key, entry);
      },
    };
    line.push(entry);
    if (line.length === 1) return Promise.resolve(entry);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const stop = (): void => {
        if (timer) clearTimeout(timer);
        signal.removeEventListener('abort', giveUp);
        entry.promote = undefined;
        entry.giveUp = undefined;
      };
      const giveUp = (): void => {
        stop();
        entry.leave();
        resolve(null);
      };
      entry.promote = () => {
        stop();
        resolve(entry);
      };
      entry.giveUp = giveUp;
      signal.addEventListener('abort', giveUp, { once: true });
      if (waitMs !== Infinity) timer = setTimeout(giveUp, Math.min(waitMs, MAX_TIMER_MS));
    });
  }

  /** Callers in the line of `key`, its head included. */
  size(key: string): number {
    return this.lines.get(key)?.length ?? 0;
  }

  /** Callers in the line of `key` that are not waiting inside the database. */
  waitingHere(key: string): number {
    return this.lines.get(key)?.filter((entry) => !entry.inDatabase).length ?? 0;
  }

  /** Shutdown: every caller still behind a head gives up; no one joins any more. */
  close(): void {
    this.closed = true;
    for (const line of [...this.lines.values()]) {
      for (const entry of [...line]) entry.giveUp?.();
    }
  }

  private remove(key: string, entry: Entry): void {
    const line = this.lines.get(key);
    const at = line?.indexOf(entry) ?? -1;
    if (!line || at < 0) return;
    line.splice(at, 1);
    if (line.length === 0) this.lines.delete(key);
    else if (at === 0) line[0].promote?.();
  }
}
