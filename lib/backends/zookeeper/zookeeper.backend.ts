import { LockBackendError } from '../../errors/lock.errors';
import { monotonicNow } from '../../core/shared/clock';
import { sleep, withTimeout } from '../../core/shared/timers';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
  QueuedRequest,
} from '../../core/contract/lock-backend';
import { encodeKey, nodePrefix, sortLockNodes, zxidToNumber } from './zk-paths';
import type { ZkSession } from './zk-session';
import { zkCode, type ZkModule, type ZkStat } from './zk-types';

/** Longest single wait on a predecessor's watch before re-reading the queue anyway. */
const MAX_WATCH_WAIT_MS = 1_000;
/** Attempts at creating our node when the connection drops or the key node vanishes. */
const CREATE_ATTEMPTS = 5;
/** Attempts at deleting a node of ours before giving up the whole session. */
const REMOVE_ATTEMPTS = 4;
/** Base pause between delete attempts (grows linearly). */
const REMOVE_RETRY_MS = 250;
/** Pause between attempts while the ensemble does not answer a queued waiter. */
const OUTAGE_RETRY_MS = 250;
/** How long an emptied key node is kept for the next acquisition before it is removed. */
const TIDY_DELAY_MS = 2_000;
/** Longest a close() spends removing emptied key nodes. */
const TIDY_AT_CLOSE_MS = 1_000;

/**
 * `type: 'zookeeper'`: Curator's InterProcessMutex. Each acquisition creates an ephemeral
 * sequential node `_c_<token>-lock-<seq>` under `<root>/<encoded key>`; the lowest sequence
 * holds; every other waiter watches only its immediate predecessor (no herd), which makes the
 * queue FIFO. The lock lives as long as the session: no ttl, no renewal write. Fence = the
 * czxid of our node (zxids only grow, even when the key node is removed and recreated).
 */
export class ZookeeperLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: false,
    fencing: true,
    waiting: 'queue-first',
  };

  /** Key nodes left empty by a release, removed after TIDY_DELAY_MS unless used again. */
  private readonly emptyDirs = new Map<string, NodeJS.Timeout>();
  /** Paths of the nodes this process holds, by `fullKey\0token`. */
  private readonly held = new Map<string, { key: string; token: string; path: string }>();
  private lostListener: LockLossListener = () => undefined;

  constructor(
    private readonly zk: ZkModule,
    private readonly session: ZkSession,
    private readonly rootPath: string,
    private readonly acls: unknown[],
    private readonly backendName: string,
  ) {
    session.hasHolders = () => this.held.size > 0;
    session.onSessionLost((reason) => {
      const lost = [...this.held.values()];
      this.held.clear();
      for (const { key, token } of lost) this.lostListener(key, token, reason);
    });
  }

  /**
   * 0.9 x the negotiated session timeout: the same margin the session's liveness check gives up
   * at. A renewal (`exists` on our node) answered by the server proves the session was alive when
   * it was sent; a holder paused longer than this must not trust its lock on waking up.
   */
  leaseValidity(ttlMs: number): number {
    return Math.min(ttlMs, Math.floor(this.session.sessionTimeout * 0.9));
  }

  async tryAcquire({ key, token }: GrantRequest): Promise<LockGrant | null> {
    const dir = this.dirOf(key);
    const path = await this.createNode(dir, token);
    const { queue, stat } = await this.readQueue(dir, path);
    if (queue[0] === basename(path)) return this.granted(key, token, path, stat);
    await this.removeQuietly(path); // one try: leave the queue again
    return null;
  }

  async acquire({
    key,
    token,
    waitMs,
    signal,
    onQueued,
  }: QueuedRequest): Promise<LockGrant | null> {
    const dir = this.dirOf(key);
    const deadline = monotonicNow() + waitMs;
    let path: string | undefined;
    let watch: PredecessorWatch | undefined;
    try {
      for (;;) {
        const remaining = deadline - monotonicNow();
        try {
          path ??= await this.createNode(dir, token);
          const { queue, stat } = await this.readQueue(dir, path);
          const index = queue.indexOf(basename(path));
          if (index === 0) {
            const grant = await this.granted(key, token, path, stat);
            path = undefined; // ours now (or removed, if it was an abandoned session's)
            if (grant) return grant;
            continue; // queue again under the current session
          }
          if (remaining <= 0 || signal.aborted) return null;
          if (index < 0) {
            // Our node is gone (the session was replaced): queue again.
            path = undefined;
            continue;
          }
          onQueued?.();
          const predecessor = `${dir}/${queue[index - 1]}`;
          // One watch per predecessor: re-arm only when it fired or the predecessor changed
          // (the client keeps every watcher it is given, so one per loop would pile up).
          if (watch?.path !== predecessor || watch.fired) watch = this.watchDeletion(predecessor);
          await this.waitAtMost(watch.done, Math.min(remaining, MAX_WATCH_WAIT_MS), signal);
        } catch (err) {
          // An outage while queued: keep our place if the session survives, until the deadline.
          if (!this.session.isConnectionError(err) || remaining <= 0 || signal.aborted) throw err;
          await sleep(Math.min(remaining, OUTAGE_RETRY_MS), signal);
        }
      }
    } finally {
      if (path !== undefined) await this.removeQuietly(path);
    }
  }

  async extend(key: string, token: string): Promise<boolean> {
    // Session-bound: "still ours" means our node still exists (and the session answered).
    const path = await this.findNode(key, token);
    return path !== undefined && (await this.session.exists(path)) !== null;
  }

  async release(key: string, token: string): Promise<boolean> {
    const path = await this.findNode(key, token);
    this.held.delete(slot(key, token));
    if (path === undefined) return false;
    const removed = await this.removeOwnNode(path);
    if (removed) this.tidyLater(this.dirOf(key));
    return removed;
  }

  async isLocked(key: string): Promise<boolean> {
    try {
      return sortLockNodes(await this.session.getChildren(this.dirOf(key))).length > 0;
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return false;
      throw err;
    }
  }

  onLost(listener: LockLossListener): void {
    this.lostListener = listener;
  }

  async ping(): Promise<void> {
    // A read of the root answers only over a connected session.
    await this.session.exists('/');
  }

  async close(): Promise<void> {
    this.held.clear();
    const dirs = [...this.emptyDirs.keys()];
    for (const timer of this.emptyDirs.values()) clearTimeout(timer);
    this.emptyDirs.clear();
    // Tidy what is still pending, briefly: a dead ensemble must not hold up the shutdown.
    await withTimeout(
      Promise.allSettled(dirs.map((dir) => this.session.remove(dir))),
      TIDY_AT_CLOSE_MS,
    ).catch(() => undefined);
    await this.session.close();
  }

  /**
   * Removes an empty key node a little later rather than at once: a key is usually taken again
   * soon, and re-creating its node would cost two more round trips per acquisition. A removal
   * that finds the node in use fails NOT_EMPTY and is ignored; a creator racing a removal
   * recreates the node (see createNode).
   */
  private tidyLater(dir: string): void {
    if (this.emptyDirs.has(dir)) return;
    const timer = setTimeout(() => {
      this.emptyDirs.delete(dir);
      this.session.remove(dir).catch(() => undefined);
    }, TIDY_DELAY_MS);
    timer.unref();
    this.emptyDirs.set(dir, timer);
  }

  /** The sorted queue and our node's stat, read in one round trip (pipelined). */
  private async readQueue(
    dir: string,
    path: string,
  ): Promise<{ queue: string[]; stat: ZkStat | null }> {
    const stat = this.session.exists(path);
    stat.catch(() => undefined); // the queue read's failure is the one reported
    const children = await this.session.getChildren(dir);
    return { queue: sortLockNodes(children), stat: await stat };
  }

  private dirOf(key: string): string {
    return `${this.rootPath}/${encodeKey(key)}`;
  }

  /**
   * Records a grant, or refuses it (`null`) when the node belongs to a session we already gave
   * up: that session may still live on the server for a while, but it will expire and take the
   * node with it, so treating the node as ours would let a second holder in.
   */
  private async granted(
    key: string,
    token: string,
    path: string,
    /** Our node's stat, read after its creation (the client has no create2). */
    stat: ZkStat | null,
  ): Promise<LockGrant | null> {
    if (!stat)
      throw new LockBackendError(
        this.backendName,
        `granted node ${path} vanished before it could be read`,
      );
    const current = this.session.sessionId;
    const owner = stat.ephemeralOwner;
    if (current && Buffer.isBuffer(owner) && !owner.equals(current)) {
      await this.removeQuietly(path);
      return null;
    }
    this.held.set(slot(key, token), { key, token, path });
    return { fence: zxidToNumber(stat.czxid), grantedAt: monotonicNow() };
  }

  /**
   * Creates our queue node. If the key node is missing, create it and retry. If the connection
   * drops mid-request, the create may have happened: look for our protected `_c_<token>-` node
   * before trying again, so no orphan node ever blocks the queue.
   */
  private async createNode(dir: string, token: string): Promise<string> {
    const tidy = this.emptyDirs.get(dir);
    if (tidy) {
      clearTimeout(tidy);
      this.emptyDirs.delete(dir);
    }
    let lastError: unknown;
    for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
      try {
        return await this.session.create(
          `${dir}/${nodePrefix(token)}`,
          this.acls,
          this.zk.CreateMode.EPHEMERAL_SEQUENTIAL,
        );
      } catch (err) {
        lastError = err;
        if (zkCode(err) === this.zk.Exception.NO_NODE) {
          await this.session.mkdirp(dir, this.acls).catch((e: unknown) => {
            if (zkCode(e) !== this.zk.Exception.NODE_EXISTS) throw e;
          });
          continue;
        }
        if (!this.session.isConnectionError(err)) throw err;
        const existing = await this.findInDir(dir, token).catch(() => undefined);
        if (existing) return existing;
      }
    }
    throw lastError;
  }

  private async findNode(key: string, token: string): Promise<string | undefined> {
    return this.held.get(slot(key, token))?.path ?? (await this.findInDir(this.dirOf(key), token));
  }

  private async findInDir(dir: string, token: string): Promise<string | undefined> {
    let children: string[];
    try {
      children = await this.session.getChildren(dir);
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return undefined;
      throw err;
    }
    const name = children.find((c) => c.startsWith(nodePrefix(token)));
    return name === undefined ? undefined : `${dir}/${name}`;
  }

  /** Watches `path` once: `done` resolves when it changes or is gone (or the watch fails). */
  private watchDeletion(path: string): PredecessorWatch {
    let resolve!: () => void;
    const watch: PredecessorWatch = {
      path,
      fired: false,
      done: new Promise<void>((r) => (resolve = r)),
    };
    const fire = (): void => {
      watch.fired = true;
      resolve();
    };
    this.session.exists(path, fire).then(
      (stat) => stat === null && fire(), // already gone: re-read the queue now
      fire,
    );
    return watch;
  }

  /** Waits for `done`, at most `maxMs`, or until `signal` aborts. */
  private waitAtMost(done: Promise<void>, maxMs: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', finish);
        resolve();
      };
      const timer = setTimeout(finish, maxMs);
      signal.addEventListener('abort', finish, { once: true });
      void done.then(finish);
    });
  }

  /**
   * Deletes a node of ours, whatever the connection does: on a session store nothing else would
   * ever remove it while our session lives, and it would block the queue for good. Retries
   * through connection loss (a NO_NODE after a lost reply means our delete went through); if
   * it still cannot, ends the session, which removes the node with it. `false` = it was not
   * there (not ours any more).
   */
  private async removeOwnNode(path: string): Promise<boolean> {
    let replyLost = false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.session.remove(path);
        return true;
      } catch (err) {
        if (zkCode(err) === this.zk.Exception.NO_NODE) return replyLost;
        if (!this.session.isConnectionError(err)) throw err;
        replyLost = true;
        if (attempt >= REMOVE_ATTEMPTS) {
          this.session.abandon(`could not delete ${path} (${(err as Error).message})`);
          return true; // the session's end removes it
        }
        await sleep(REMOVE_RETRY_MS * attempt);
      }
    }
  }

  private async removeQuietly(path: string): Promise<void> {
    await this.removeOwnNode(path).catch(() => undefined);
  }
}

/** A watch armed on a waiter's predecessor node. */
interface PredecessorWatch {
  readonly path: string;
  fired: boolean;
  readonly done: Promise<void>;
}

function slot(key: string, token: string): string {
  return `${key}\u0000${token}`;
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
