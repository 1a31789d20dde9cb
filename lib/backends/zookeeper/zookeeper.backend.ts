import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { sleep, withTimeout } from '../../core/shared/timers';
import { sleepUntilWoken, type WakeSource } from '../../core/shared/wake-up';
import type {
  GrantRequest,
  LockBackend,
  LockBackendCapabilities,
  LockGrant,
  LockLossListener,
  QueuedRequest,
  StoreLockInfo,
} from '../../core/contract/lock-backend';
import { ZkUnavailableError } from './zk-errors';
import {
  encodeKey,
  nodePrefix,
  placeInQueue,
  sortLockNodes,
  zxidToNumber,
  type QueuePlace,
} from './zk-paths';
import type { ConnectionWait, ZkSession } from './zk-session';
import { zkCode, type ZkModule, type ZkStat } from './zk-types';

/** Existence checks per multi request of a batched renewal. */
const MULTI_CHECKS = 1_000;

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
 * Longest a waiter that stops (aborted, out of time, failed) waits for its node's deletion
 * before returning: one round trip when connected; in an outage the deletion goes on in the
 * background while the caller is answered at once.
 */
const LEAVE_QUEUE_WAIT_MS = 250;
/** Reads `inspect` makes when the holder it found leaves before its stat could be read. */
const INSPECT_ATTEMPTS = 5;
/** Key node paths remembered (see dirOf); the memo is emptied when it reaches this size. */
const RECENT_DIRS = 1_000;
/** What {@link untilAborted} resolves when the signal aborted first. */
const ABORTED = Symbol('aborted');

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
    // Shared and counted locks are not built on ZooKeeper yet (issue 19): refused by the engine.
    shared: false,
    permits: false,
  };

  /** Key nodes left empty by a release, removed after TIDY_DELAY_MS unless used again. */
  private readonly emptyDirs = new Map<string, NodeJS.Timeout>();
  /** Paths of the nodes this process holds, by `fullKey\0token`. */
  private readonly held = new Map<string, { key: string; token: string; path: string }>();
  private lostListener: LockLossListener = () => undefined;
  /** Key node paths of recently used keys (see dirOf). */
  private readonly recentDirs = new Map<string, string>();

  constructor(
    private readonly zk: ZkModule,
    private readonly session: ZkSession,
    private readonly rootPath: string,
    private readonly acls: unknown[],
    private readonly backendName: string,
    /** Scrubs the configuration's secrets from the loss reasons this backend reports. */
    private readonly redactor: SecretRedactor,
  ) {
    session.hasHolders = () => this.held.size > 0;
    session.onSessionLost((reason) => {
      const lost = [...this.held.values()];
      this.held.clear();
      const text = this.redactor.text(reason);
      for (const { key, token } of lost) this.lostListener(key, token, text);
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
    const { place, stat } = await this.readQueue(dir, path);
    if (place.kind === 'first') return this.granted(key, token, path, stat);
    await this.removeQuietly(dir, token, path); // one try: leave the queue again
    return null;
  }

  /**
   * Queues (an ephemeral sequential node) and waits for the predecessor's deletion. A call made
   * while the ensemble is known down fails at once with the reason. A waiter already queued that
   * loses its connection keeps its place while its session can still live (the node lives with
   * the session): it goes on in order if the ensemble answers in time, and fails with the reason
   * once the session cannot have survived. An abort returns at once; the node is deleted then
   * (or in the background if the ensemble does not answer), so nothing of the waiter stays.
   */
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
    /** The session generation our node belongs to: it lives only as long as that session. */
    let placedIn = 0;
    /** A create was lost with its reply, so it may have happened: look for that node first. */
    let lookFirst = false;
    let watch: PredecessorWatch | undefined;
    /**
     * Our node's stat, read once with the first queue read: its czxid (the fence) and owner
     * never change, so a wake-up re-reads only the queue, the one request the textbook recipe
     * sends there (re-reading it cost each hand-off a second request).
     */
    let ownStat: ZkStat | null | undefined;
    try {
      for (;;) {
        if (signal.aborted) return null;
        const remaining = deadline - monotonicNow();
        try {
          if (path === undefined) {
            const creating = this.createNode(dir, token, lookFirst);
            const created = await untilAborted(creating, signal);
            if (created === ABORTED) {
              // The create may still land: take that node out again once it does.
              void creating.then(
                (p) => this.removeQuietly(dir, token, p),
                () => this.removeQuietly(dir, token),
              );
              return null;
            }
            path = created;
            placedIn = this.session.generation;
            lookFirst = false;
            ownStat = undefined;
          }
          const read = await untilAborted(this.readQueue(dir, path, ownStat), signal);
          if (read === ABORTED) return null;
          ownStat = read.stat;
          const { place } = read;
          if (place.kind === 'first') {
            const grant = await this.granted(key, token, path, read.stat);
            path = undefined; // ours now (or removed, if it was an abandoned session's)
            if (grant) return grant;
            ownStat = undefined;
            continue; // queue again under the current session
          }
          if (remaining <= 0) return null;
          if (place.kind === 'gone') {
            // Our node is gone (the session was replaced): queue again.
            path = undefined;
            ownStat = undefined;
            continue;
          }
          onQueued?.();
          const predecessor = `${dir}/${place.predecessor}`;
          // One watch per predecessor: re-arm only when it fired, the predecessor changed, or
          // the session was replaced (the old client's watches never fire). The client keeps
          // every watcher it is given, so one per loop would pile up.
          if (
            watch?.path !== predecessor ||
            watch.fired ||
            watch.generation !== this.session.generation
          ) {
            watch = this.watchDeletion(predecessor);
          }
          // Nothing is read again until the watch fires (Curator's wait): a periodic re-read
          // costs each waiter a read of the whole queue, n waiters n reads of n names, queued
          // on the session ahead of the read that hands the lock over (issue 18: 1,000
          // waiters made 7 sections in 10 s).
          await sleepUntilWoken(remaining, signal, [watch.source, this.sessionTrouble(placedIn)]);
        } catch (err) {
          if (signal.aborted) return null;
          if (!this.session.isConnectionError(err) || remaining <= 0) throw err;
          if (path === undefined) lookFirst = true;
          // The ensemble is known down: fail now with the reason, unless we hold a place in
          // the queue that our session may still keep (then wait for it, up to the deadline).
          const keepsPlace = path !== undefined && this.session.mayStillLive(placedIn);
          if (this.session.unavailable() && !keepsPlace) throw err;
          await sleep(Math.min(remaining, OUTAGE_RETRY_MS), signal);
        }
      }
    } finally {
      if (path !== undefined) await this.leaveQueue(dir, token, path, placedIn);
    }
  }

  async extend(key: string, token: string): Promise<boolean> {
    // Session-bound: "still ours" means our node still exists (and the session answered). A
    // renewal waits for a reconnection: the lock is ours as long as the session lives.
    const path = await this.findNode(key, token, 'reconnect');
    return path !== undefined && (await this.session.exists(path, undefined, 'reconnect')) !== null;
  }

  /**
   * Renewal of session locks is a liveness check (the session, not a lease, keeps them): all the
   * due ones in one multi of existence checks instead of one `exists` round trip per lock. A
   * missing node makes the server skip the checks after it: those are asked again.
   */
  async extendMany(requests: readonly GrantRequest[]): Promise<readonly boolean[]> {
    const results: boolean[] = new Array<boolean>(requests.length).fill(false);
    const pending: Array<{ index: number; path: string }> = [];
    const unknown: number[] = [];
    requests.forEach(({ key, token }, index) => {
      const path = this.held.get(slot(key, token))?.path;
      if (path === undefined) unknown.push(index);
      else pending.push({ index, path });
    });
    // A lock this process does not know the node of (never the case for a live lease): the
    // single-lock path looks it up.
    await Promise.all(
      unknown.map(async (index) => {
        const { key, token } = requests[index];
        results[index] = await this.extend(key, token);
      }),
    );
    // Chunks keep each request well under the server's packet limit (jute.maxbuffer, 1 MB).
    const chunks: Array<typeof pending> = [];
    for (let i = 0; i < pending.length; i += MULTI_CHECKS) {
      chunks.push(pending.slice(i, i + MULTI_CHECKS));
    }
    await Promise.all(chunks.map((chunk) => this.checkHeld(chunk, results)));
    return results;
  }

  /** Sets `results[index]` for each node of `pending`: whether it still exists. */
  private async checkHeld(
    pending: Array<{ index: number; path: string }>,
    results: boolean[],
  ): Promise<void> {
    while (pending.length > 0) {
      const answers = await this.session.existAll(
        pending.map((p) => p.path),
        'reconnect',
      );
      const next: typeof pending = [];
      pending.forEach((p, i) => {
        const answer = answers[i];
        if (answer === undefined) next.push(p);
        else results[p.index] = answer;
      });
      // The server answers at least up to its first failing check; no progress means an answer
      // this code does not understand: fail the batch (the engine retries) instead of looping.
      if (next.length === pending.length) throw new Error('ZooKeeper multi check: no answer');
      pending = next;
    }
  }

  async release(key: string, token: string): Promise<boolean> {
    const known = this.held.get(slot(key, token))?.path;
    this.held.delete(slot(key, token));
    const dir = this.dirOf(key);
    const removed = await this.removeOwn(dir, token, known);
    if (removed) this.tidyLater(dir);
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

  /**
   * The queue as one read sees it: held when the lowest sequence node exists, `fence` its czxid
   * (the holder's fence), `waiting` the nodes behind it. When free, `fence` is the key node's
   * pzxid, read in the same reply as its (empty) children: the zxid of the last creation or
   * deletion of a lock node, so at least every fence handed out for the key so far, and below
   * the next one (a later node's czxid is a later zxid). `null` when the key node does not
   * exist (never used, or tidied away): nothing then bounds the key's past fences.
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const dir = this.dirOf(key);
    for (let attempt = 1; ; attempt++) {
      const read = await this.queueOf(dir);
      if (!read) return { held: false, fence: null, waiting: 0, holders: 0 };
      if (read.queue.length === 0) {
        return { held: false, fence: zxidToNumber(read.stat.pzxid), waiting: 0, holders: 0 };
      }
      const holder = await this.session.exists(`${dir}/${read.queue[0]}`);
      if (holder) {
        const fence = zxidToNumber(holder.czxid);
        return { held: true, fence, waiting: read.queue.length - 1, holders: 1 };
      }
      // The holder left between the two reads: read the queue again.
      if (attempt >= INSPECT_ATTEMPTS) {
        throw new Error(`the holder of ${dir} changed under ${attempt} reads in a row`);
      }
    }
  }

  /**
   * Deletes the holder's node (the lowest in the queue), whoever's it is: the next in line is
   * granted through its watch, and the old holder's next renewal (an `exists` on that node)
   * finds it gone, so its signal aborts. With `acl: 'creator'` only the same identity may
   * delete (ZooKeeper answers NO_AUTH otherwise). `false` when the key was free, or its holder
   * left before the deletion.
   */
  async forceRelease(key: string): Promise<boolean> {
    const dir = this.dirOf(key);
    const read = await this.queueOf(dir);
    if (!read || read.queue.length === 0) return false;
    const holder = `${dir}/${read.queue[0]}`;
    try {
      await this.session.remove(holder);
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return false;
      throw err;
    }
    // A node of this process: not held any more (the engine reports the lease lost itself).
    for (const [held, entry] of this.held) if (entry.path === holder) this.held.delete(held);
    return true;
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

  /** A key's queue with the key node's stat, or `null` when the key node does not exist. */
  private async queueOf(dir: string): Promise<{ queue: string[]; stat: ZkStat } | null> {
    try {
      const { names, stat } = await this.session.children(dir);
      return { queue: sortLockNodes(names), stat };
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return null;
      throw err;
    }
  }

  /**
   * Our node's place in the queue and its stat, read in one round trip: both requests pipelined
   * and written to the socket at once. `known`: the stat read before (it never changes), so only
   * the queue is read.
   */
  private async readQueue(
    dir: string,
    path: string,
    known?: ZkStat | null,
  ): Promise<{ place: QueuePlace; stat: ZkStat | null }> {
    const own = basename(path);
    if (known) {
      return { place: placeInQueue(await this.session.getChildren(dir), own), stat: known };
    }
    const [stat, children] = this.session.batch(() => [
      this.session.exists(path),
      this.session.getChildren(dir),
    ]);
    stat.catch(() => undefined); // the queue read's failure is the one reported
    const names = await children;
    return { place: placeInQueue(names, own), stat: await stat };
  }

  /** The key node's path; remembered for recent keys (a cycle needs it three times). */
  private dirOf(key: string): string {
    let dir = this.recentDirs.get(key);
    if (dir === undefined) {
      dir = `${this.rootPath}/${encodeKey(key)}`;
      if (this.recentDirs.size >= RECENT_DIRS) this.recentDirs.clear();
      this.recentDirs.set(key, dir);
    }
    return dir;
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
      await this.removeQuietly(dirname(path), token, path);
      return null;
    }
    this.held.set(slot(key, token), { key, token, path });
    return { fence: zxidToNumber(stat.czxid), grantedAt: monotonicNow() };
  }

  /**
   * Creates our queue node. If the key node is missing, create it and retry. If the connection
   * drops mid-request, the create may have happened: look for our protected `_c_<token>-` node
   * before trying again (and first, with `lookFirst`), so no orphan node ever blocks the queue.
   * A request refused before it was sent (the ensemble is known down) fails at once.
   */
  private async createNode(dir: string, token: string, lookFirst = false): Promise<string> {
    const tidy = this.emptyDirs.get(dir);
    if (tidy) {
      clearTimeout(tidy);
      this.emptyDirs.delete(dir);
    }
    if (lookFirst) {
      const existing = await this.findInDir(dir, token);
      if (existing) return existing;
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
        if (!this.session.isConnectionError(err) || notSent(err)) throw err;
        const existing = await this.findInDir(dir, token).catch(() => undefined);
        if (existing) return existing;
      }
    }
    throw lastError;
  }

  private async findNode(
    key: string,
    token: string,
    wait: ConnectionWait,
  ): Promise<string | undefined> {
    return (
      this.held.get(slot(key, token))?.path ?? (await this.findInDir(this.dirOf(key), token, wait))
    );
  }

  private async findInDir(
    dir: string,
    token: string,
    wait: ConnectionWait = 'fail-fast',
  ): Promise<string | undefined> {
    let children: string[];
    try {
      children = await this.session.getChildren(dir, wait);
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return undefined;
      throw err;
    }
    const name = children.find((c) => c.startsWith(nodePrefix(token)));
    return name === undefined ? undefined : `${dir}/${name}`;
  }

  /**
   * Watches `path` once: `source` wakes its sleeper when the node changes or is gone, or the
   * watch could not be armed (already gone, or no answer: the queue is read again then).
   */
  private watchDeletion(path: string): PredecessorWatch {
    let wake: (() => void) | undefined;
    const watch: PredecessorWatch = {
      path,
      generation: this.session.generation,
      fired: false,
      source: (w) => {
        if (watch.fired) w();
        else wake = w;
        return () => {
          if (wake === w) wake = undefined;
        };
      },
    };
    const fire = (): void => {
      watch.fired = true;
      wake?.();
    };
    this.session.watchNode(path, fire).catch(fire);
    return watch;
  }

  /**
   * Wakes a queued waiter whose watch may never fire: the session its node was placed in was
   * replaced (that node is gone, the old client's watches with it), or the ensemble is known
   * down (the waiter then keeps its place only while its session can live: see acquire). A
   * reconnection to the same session needs nothing: the client re-arms its watches itself, and
   * the server reports a deletion missed meanwhile.
   */
  private sessionTrouble(generation: number): WakeSource {
    return (wake) => {
      const check = (): void => {
        if (this.session.generation !== generation || this.session.unavailable()) wake();
      };
      check();
      return this.session.changes(check);
    };
  }

  /**
   * Deletes the node of `token` in `dir` (at `known`, else looked up), whatever the connection
   * does: on a session store nothing else would ever remove it while our session lives, and it
   * would block the queue for good. Retries through connection loss, waiting for reconnections
   * (a NO_NODE after a lost reply means our delete went through); if it still cannot, ends the
   * session, which removes the node with it, unless the node belongs to a session already given
   * up (`generation`): that one's end takes it. `false` = it was not there (not ours any more).
   */
  private async removeOwn(
    dir: string,
    token: string,
    known?: string,
    generation = this.session.generation,
  ): Promise<boolean> {
    let path = known;
    let replyLost = false;
    for (let attempt = 1; ; attempt++) {
      try {
        path ??= await this.findInDir(dir, token, 'reconnect');
        if (path === undefined) return false;
        await this.session.remove(path, 'reconnect');
        return true;
      } catch (err) {
        if (zkCode(err) === this.zk.Exception.NO_NODE) return replyLost;
        if (!this.session.isConnectionError(err)) throw err;
        replyLost = path !== undefined;
        if (attempt >= REMOVE_ATTEMPTS) {
          if (generation === this.session.generation) {
            this.session.abandon(
              `could not delete ${path ?? `the node of a lost create in ${dir}`} (${(err as Error).message})`,
            );
          }
          return true; // the session's end removes it
        }
        await sleep(REMOVE_RETRY_MS * attempt);
      }
    }
  }

  private async removeQuietly(
    dir: string,
    token: string,
    known?: string,
    generation?: number,
  ): Promise<void> {
    await this.removeOwn(dir, token, known, generation).catch(() => undefined);
  }

  /**
   * A waiter leaves the queue: its node is deleted, waited for up to LEAVE_QUEUE_WAIT_MS (one
   * round trip when connected); an ensemble that does not answer is not waited on, the
   * deletion goes on in the background.
   */
  private async leaveQueue(
    dir: string,
    token: string,
    path: string,
    generation: number,
  ): Promise<void> {
    await withTimeout(this.removeQuietly(dir, token, path, generation), LEAVE_QUEUE_WAIT_MS).catch(
      () => undefined,
    );
  }
}

/**
 * `work`'s result, or {@link ABORTED} as soon as `signal` aborts (the work goes on; a failure
 * after the abort is ignored).
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.resolve(ABORTED);
  }
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(ABORTED);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A request refused before it was sent: the ensemble is known down, nothing happened. */
function notSent(err: unknown): boolean {
  return err instanceof ZkUnavailableError && !err.sent;
}

/** A watch armed on a waiter's predecessor node. */
interface PredecessorWatch {
  readonly path: string;
  /** The session generation it was armed in: a replaced session's watches never fire. */
  readonly generation: number;
  fired: boolean;
  /** Wakes one sleeper when the watch fires (at once if it already has). */
  readonly source: WakeSource;
}

function slot(key: string, token: string): string {
  return `${key}\u0000${token}`;
}

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
