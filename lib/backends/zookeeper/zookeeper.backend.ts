import { LockBackendError } from '../../errors/lock.errors';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
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
  kindOf,
  kindOfRequest,
  MUTEX,
  mutexTokenOf,
  nodePrefix,
  slotName,
  slotOf,
  slotsIn,
  sortLockNodes,
  tokenPrefix,
  zxidToNumber,
  type NodeKind,
} from './zk-paths';
import { placeInQueue, queueView, type QueuePlace } from './zk-queue';
import type { ConnectionWait, ZkSession } from './zk-session';
import { zkCode, type ZkModule, type ZkStat } from './zk-types';
import { ZkWatches, type ZkWatch } from './zk-watches';

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
/** Written to a counted lock's node when it is admitted: wakes the waiter watching it. */
const ADMITTED = Buffer.from('admitted');

/**
 * `type: 'zookeeper'`: Curator's InterProcessMutex. Each acquisition creates an ephemeral
 * sequential node `_c_<token>-lock-<seq>` under `<root>/<encoded key>`; the lowest sequence
 * holds; every other waiter watches only its immediate predecessor (no herd), which makes the
 * queue FIFO. The lock lives as long as the session: no ttl, no renewal write. Fence = the
 * czxid of our node (zxids only grow, even when the key node is removed and recreated).
 *
 * Shared and counted locks use the same queue, the node's kind in its name (see
 * `placeInQueue`): a reader (`-read-`) holds when no writer is ahead of it and watches the
 * nearest writer ahead (Curator's InterProcessReadWriteLock); a request of a counted lock
 * (`-sem<N>-`) is admitted when fewer than N are ahead of it (Curator's semaphore), then claims
 * the lowest free slot by creating the ephemeral `slot-<i>` node (ZooKeeper refuses a taken one)
 * in the same multi that marks its queue node admitted; that multi's zxid is its fence, so fences
 * follow the order of the grants. A waiter watches the node just ahead (deletion, or the mark),
 * the first waiter the queue itself (any holder leaving admits it).
 */
export class ZookeeperLockBackend implements LockBackend {
  readonly capabilities: LockBackendCapabilities = {
    leaseBased: false,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
  };

  /** Key nodes left empty by a release, removed after TIDY_DELAY_MS unless used again. */
  private readonly emptyDirs = new Map<string, NodeJS.Timeout>();
  /** The nodes this process holds, by `fullKey\0token`. */
  private readonly held = new Map<string, HeldNode>();
  /** The watches queued waiters sleep on. */
  private readonly watches: ZkWatches;
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
    this.watches = new ZkWatches(session);
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

  async tryAcquire({ key, token, mode, permits }: GrantRequest): Promise<LockGrant | null> {
    const kind = kindOfRequest(mode, permits);
    const dir = this.dirOf(key);
    const path = await this.createNode(dir, token, kind);
    const read = await this.readQueue(dir, path);
    if (read.place.kind === 'first') return this.granted(key, token, path, read, kind);
    await this.removeQuietly(dir, token, path); // one try: leave the queue again
    if (read.place.kind === 'refused') {
      throw permitsDisagreement(key, read.place.permits, kind.permits);
    }
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
    mode,
    permits,
    waitMs,
    signal,
    onQueued,
  }: QueuedRequest): Promise<LockGrant | null> {
    const kind = kindOfRequest(mode, permits);
    const dir = this.dirOf(key);
    const deadline = monotonicNow() + waitMs;
    let path: string | undefined;
    /** The session generation our node belongs to: it lives only as long as that session. */
    let placedIn = 0;
    /** A create was lost with its reply, so it may have happened: look for that node first. */
    let lookFirst = false;
    let watch: ZkWatch | undefined;
    /**
     * Our node's stat, read once with the first queue read: its czxid (the fence) and owner
     * never change, so a wake-up re-reads only the queue, the one request the textbook recipe
     * sends there (re-reading it cost each hand-off a second request).
     */
    let ownStat: ZkStat | null | undefined;
    /** A slot claim of this node got no answer (see claimSlot). */
    let claimUnanswered = false;
    try {
      for (;;) {
        if (signal.aborted) return null;
        const remaining = deadline - monotonicNow();
        try {
          if (path === undefined) {
            const creating = this.createNode(dir, token, kind, lookFirst);
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
            claimUnanswered = false;
          }
          const read = await untilAborted(this.readQueue(dir, path, ownStat), signal);
          if (read === ABORTED) return null;
          ownStat = read.stat;
          const { place } = read;
          if (place.kind === 'first') {
            const counted = kind.permits > 1;
            const claimedBefore = claimUnanswered;
            claimUnanswered = counted; // until the claim answers
            const grant = await this.granted(key, token, path, read, kind, claimedBefore);
            claimUnanswered = false;
            path = undefined; // ours now (or removed: an abandoned session's, or deleted meanwhile)
            if (grant) return grant;
            ownStat = undefined;
            continue; // queue again under the current session
          }
          if (place.kind === 'refused') {
            // Leave before answering, so the next request does not find our node in the way.
            const leaving = path;
            path = undefined;
            await this.removeQuietly(dir, token, leaving, placedIn);
            throw permitsDisagreement(key, place.permits, kind.permits);
          }
          if (remaining <= 0) return null;
          if (place.kind === 'gone') {
            // Our node is gone (the session was replaced): queue again.
            path = undefined;
            ownStat = undefined;
            continue;
          }
          onQueued?.();
          // One watch per node waited on: re-armed only when it fired, the node changed, or
          // the session was replaced (the old client's watches never fire). The client keeps
          // every watcher it is given, so one per loop would pile up.
          const target = place.kind === 'head' ? dir : `${dir}/${place.predecessor}`;
          if (
            watch?.path !== target ||
            watch.fired ||
            watch.generation !== this.session.generation
          ) {
            const own = basename(path);
            watch =
              place.kind === 'head'
                ? this.watches.children(dir, (names) => placeInQueue(names, own).kind === 'head')
                : this.watches.node(
                    target,
                    kind.permits > 1 && kindOf(place.predecessor)?.permits === kind.permits,
                  );
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
      if (path !== undefined) {
        await this.leaveQueue(dir, token, path, placedIn, claimUnanswered);
      }
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
      const path = this.held.get(heldKey(key, token))?.path;
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
    const known = this.held.get(heldKey(key, token));
    this.held.delete(heldKey(key, token));
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
   * The queue as one read sees it (see `queueView`): its holders (the first node, the readers
   * before the first writer, or a counted lock's slot nodes), `fence` the highest czxid among
   * them (the latest grant's), `waiting` the nodes behind them. When free, `fence` is the key
   * node's pzxid, read in the same reply as its (empty) children: the zxid of the last creation
   * or deletion of a node under it, so at least every fence handed out for the key so far, and
   * below the next one (a later node's czxid is a later zxid). `null` when the key node does
   * not exist (never used, or tidied away): nothing then bounds the key's past fences.
   */
  async inspect(key: string): Promise<StoreLockInfo> {
    const dir = this.dirOf(key);
    for (let attempt = 1; ; attempt++) {
      const read = await this.queueOf(dir);
      if (!read) return { held: false, fence: null, waiting: 0, holders: 0 };
      const free = { held: false, fence: zxidToNumber(read.stat.pzxid), waiting: 0, holders: 0 };
      if (read.queue.length === 0) return free;
      const view = queueView(read.queue);
      // A counted lock's holders are its slot nodes (a node admitted but not yet in its slot
      // holds nothing yet); the others' are their queue nodes.
      const counted = view.permits > 1;
      const slots = counted ? slotsIn(read.names) : view.holders.map(() => 0);
      const nodes = counted ? slots.map(slotName) : view.holders;
      if (nodes.length === 0) return { ...free, waiting: view.waiting };
      const stats = await Promise.all(
        this.session.batch(() => nodes.map((name) => this.session.exists(`${dir}/${name}`))),
      );
      if (stats.every((stat) => stat !== null)) {
        return {
          held: true,
          fence: Math.max(...stats.map((stat) => zxidToNumber(stat!.czxid))),
          waiting: view.waiting,
          holders: nodes.length,
          mode: view.mode,
          permits: view.permits,
          slots,
          ...(view.mode === 'exclusive' && !counted ? { owner: mutexTokenOf(nodes[0]) } : {}),
        };
      }
      // A holder left between the two reads: read the queue again.
      if (attempt >= INSPECT_ATTEMPTS) {
        throw new Error(`the holders of ${dir} changed under ${attempt} reads in a row`);
      }
    }
  }

  /**
   * Deletes the holders' nodes (see `inspect`), whoever's they are: the next in line is granted
   * through its watch, and an old holder's next renewal (an `exists` on its node) finds it
   * gone, so its signal aborts. A counted lock's slot nodes go first, in the same write to the
   * socket (the server applies one session's requests in order), so the waiters admitted by
   * the deletions find their slots free. With `acl: 'creator'` only the same identity may
   * delete (ZooKeeper answers NO_AUTH otherwise). `false` when the key was free, or its
   * holders left before the deletion.
   */
  async forceRelease(key: string): Promise<boolean> {
    const dir = this.dirOf(key);
    const read = await this.queueOf(dir);
    if (!read || read.queue.length === 0) return false;
    const view = queueView(read.queue);
    // Each holder's nodes: a counted lock's slot with its queue node (one multi: see removeOwn).
    const holders =
      view.permits > 1
        ? await this.slotHolders(dir, read.names)
        : view.holders.map((name) => [`${dir}/${name}`]);
    const outcomes = await Promise.allSettled(
      this.session.batch(() =>
        holders.map((paths) =>
          this.session.commit((tx) => {
            for (const path of paths) tx.remove(path);
          }),
        ),
      ),
    );
    let removed = false;
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') removed = true;
      else if (zkCode(outcome.reason) !== this.zk.Exception.NO_NODE) throw outcome.reason;
    }
    // Nodes of this process: not held any more (the engine reports the leases lost itself).
    const gone = new Set(holders.flat());
    for (const [held, entry] of this.held) if (gone.has(entry.path)) this.held.delete(held);
    return removed;
  }

  /**
   * The holders of a counted lock as [slot node, queue node] pairs, each slot's holder read
   * from its data (its token) in one round trip. A slot whose queue node is gone (a claim whose
   * reply was lost, before its cleanup) is freed alone.
   */
  private async slotHolders(dir: string, names: readonly string[]): Promise<string[][]> {
    const slots = slotsIn(names).map((slot) => `${dir}/${slotName(slot)}`);
    const owners = await Promise.all(
      this.session.batch(() =>
        slots.map((path) =>
          this.session.getData(path).then(
            ({ data }) => data?.toString(),
            (err: unknown) => {
              if (zkCode(err) !== this.zk.Exception.NO_NODE) throw err;
              return undefined; // left meanwhile
            },
          ),
        ),
      ),
    );
    const pairs: string[][] = [];
    slots.forEach((slot, i) => {
      const token = owners[i];
      if (token === undefined) return;
      const node = names.find((name) => name.startsWith(tokenPrefix(token)));
      pairs.push(node === undefined ? [slot] : [slot, `${dir}/${node}`]);
    });
    return pairs;
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

  /**
   * A key's queue (its lock nodes, in order), every child's name and the key node's stat, or
   * `null` when the key node does not exist.
   */
  private async queueOf(
    dir: string,
  ): Promise<{ queue: string[]; names: string[]; stat: ZkStat } | null> {
    try {
      const { names, stat } = await this.session.children(dir);
      return { queue: sortLockNodes(names), names, stat };
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return null;
      throw err;
    }
  }

  /**
   * Our node's place in the queue, its stat and the key node's children, read in one round
   * trip: both requests pipelined and written to the socket at once. `known`: the stat read
   * before (it never changes), so only the queue is read.
   */
  private async readQueue(dir: string, path: string, known?: ZkStat | null): Promise<QueueRead> {
    const own = basename(path);
    if (known) {
      const names = await this.session.getChildren(dir);
      return { place: placeInQueue(names, own), stat: known, names };
    }
    const [stat, children] = this.session.batch(() => [
      this.session.exists(path),
      this.session.getChildren(dir),
    ]);
    stat.catch(() => undefined); // the queue read's failure is the one reported
    const names = await children;
    return { place: placeInQueue(names, own), stat: await stat, names };
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
    /** The read that found us first: our node's stat (the client has no create2), the queue. */
    { stat, names }: QueueRead,
    kind: NodeKind,
    /** An earlier claim of a slot for this node failed without an answer: it may have landed. */
    maybeClaimed = false,
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
    if (kind.permits === 1) {
      this.held.set(heldKey(key, token), { key, token, path });
      return { fence: zxidToNumber(stat.czxid), grantedAt: monotonicNow() };
    }
    let claimed: Awaited<ReturnType<typeof this.claimSlot>>;
    try {
      claimed = await this.claimSlot(path, token, kind.permits, names, maybeClaimed);
    } catch (err) {
      // Refused for good (no slot, no rights): leave the queue. Without an answer the claim may
      // have landed: the caller tries again, or the engine's release finds the slot.
      if (!this.session.isConnectionError(err))
        await this.removeQuietly(dirname(path), token, path);
      throw err;
    }
    if (!claimed) return null;
    this.held.set(heldKey(key, token), { key, token, path, slot: claimed.path });
    return { fence: claimed.fence, permit: claimed.slot, grantedAt: monotonicNow() };
  }

  /**
   * An admitted request of a counted lock takes the lowest slot free in the queue read that
   * admitted it: one multi creates `slot-<i>` and marks our queue node admitted (waking the
   * waiter that watches it), all or none. A slot taken meanwhile (NODE_EXISTS) means the next
   * one; one is free, since at most `permits - 1` others are admitted (a slot node lives only
   * while its queue node does: release, forceRelease and the session's end delete both at
   * once), so finding none twice is a broken queue, refused (fail closed). `null` when our queue node is gone
   * (force-released, or the session's end): nothing was created. Fence: the multi's zxid.
   * `maybeClaimed`: an earlier claim got no answer, so a slot with our token is ours already (a
   * second claim would hold two).
   */
  private async claimSlot(
    path: string,
    token: string,
    permits: number,
    names: readonly string[],
    maybeClaimed: boolean,
  ): Promise<{ slot: number; path: string; fence: number } | null> {
    const dir = dirname(path);
    if (maybeClaimed) {
      const mine = await this.slotHeldBy(dir, names, token, false);
      if (mine) return { slot: mine.slot, path: mine.path, fence: zxidToNumber(mine.stat.czxid) };
    }
    let taken = new Set(slotsIn(names));
    for (let round = 1; ; round++) {
      for (let slot = 0; slot < permits; slot++) {
        if (taken.has(slot)) continue;
        const slotPath = `${dir}/${slotName(slot)}`;
        try {
          const [marked] = await this.session.commit((tx) =>
            tx
              .setData(path, ADMITTED)
              .create(slotPath, Buffer.from(token), this.acls, this.zk.CreateMode.EPHEMERAL),
          );
          return { slot, path: slotPath, fence: zxidToNumber(marked.stat!.mzxid!) };
        } catch (err) {
          const code = zkCode(err);
          if (code === this.zk.Exception.NO_NODE) return null;
          // Taken, or a lost reply (then the multi may have happened): ours if it has our
          // token (an earlier claim of this request whose reply was lost also shows here).
          const known = code === this.zk.Exception.NODE_EXISTS;
          const mine = await this.ownSlot(slotPath, token).catch((e: unknown) => {
            if (known) throw e;
          });
          if (mine) return { slot, path: slotPath, fence: zxidToNumber(mine.czxid) };
          if (!known) throw err;
          taken.add(slot);
        }
      }
      if (round === 2) {
        throw new LockBackendError(
          this.backendName,
          `no free slot of ${permits} under ${dir} for an admitted request`,
        );
      }
      taken = new Set(slotsIn(await this.session.getChildren(dir)));
    }
  }

  /** The stat of slot node `path` if `token` holds it, else `undefined`. */
  private async ownSlot(path: string, token: string): Promise<ZkStat | undefined> {
    try {
      const { data, stat } = await this.session.getData(path, 'reconnect');
      return data?.toString() === token ? stat : undefined;
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return undefined;
      throw err;
    }
  }

  /**
   * Creates our queue node. If the key node is missing, create it and retry. If the connection
   * drops mid-request, the create may have happened: look for our protected `_c_<token>-` node
   * before trying again (and first, with `lookFirst`), so no orphan node ever blocks the queue.
   * A request refused before it was sent (the ensemble is known down) fails at once.
   */
  private async createNode(
    dir: string,
    token: string,
    kind: NodeKind = MUTEX,
    lookFirst = false,
  ): Promise<string> {
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
          `${dir}/${nodePrefix(token, kind)}`,
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
      this.held.get(heldKey(key, token))?.path ??
      (await this.findInDir(this.dirOf(key), token, wait))
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
    const prefix = tokenPrefix(token);
    const name = children.find((c) => c.startsWith(prefix));
    return name === undefined ? undefined : `${dir}/${name}`;
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
    known?: KnownNode,
    generation = this.session.generation,
  ): Promise<boolean> {
    let path = known?.path;
    // A counted lock's slot; looked up with an unknown node, or after a claim without answer.
    let slot = known?.slot;
    let lookForSlot = known?.maybeSlot === true;
    let replyLost = false;
    for (let attempt = 1; ; attempt++) {
      try {
        if (path === undefined) ({ path, slot } = await this.findOwn(dir, token));
        else if (lookForSlot) slot = (await this.findOwn(dir, token)).slot;
        lookForSlot = false;
        if (path === undefined) {
          // A grant whose reply was lost may have left its slot alone (found by its token).
          if (slot !== undefined) await this.removeSlot(slot);
          return false;
        }
        if (slot !== undefined) {
          // The slot and its queue node in one multi, or neither: a slot is ours only while our
          // queue node lives (forceRelease deletes both together too), so once that node is gone
          // the slot may be someone else's already, and only the queue node is tried.
          try {
            await this.session.commit((tx) => tx.remove(slot!).remove(path!), 'reconnect');
            return true;
          } catch (err) {
            if (zkCode(err) !== this.zk.Exception.NO_NODE) throw err;
            slot = undefined;
          }
        }
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

  /** Deletes a slot node of ours left without its queue node; already gone is fine. */
  private async removeSlot(path: string): Promise<void> {
    await this.session.remove(path, 'reconnect').catch((err: unknown) => {
      if (zkCode(err) !== this.zk.Exception.NO_NODE) throw err;
    });
  }

  /**
   * The queue node and slot node of `token` in `dir`, for a release this process has no record
   * of (a reply lost). The slot is looked up by its data, and only for a counted lock's node or
   * when no queue node is left (a grant whose reply was lost may have left a slot alone).
   */
  private async findOwn(dir: string, token: string): Promise<{ path?: string; slot?: string }> {
    let children: string[];
    try {
      children = await this.session.getChildren(dir, 'reconnect');
    } catch (err) {
      if (zkCode(err) === this.zk.Exception.NO_NODE) return {};
      throw err;
    }
    const prefix = tokenPrefix(token);
    const name = children.find((c) => c.startsWith(prefix));
    const path = name === undefined ? undefined : `${dir}/${name}`;
    if (name !== undefined && (kindOf(name)?.permits ?? 1) === 1) return { path };
    return { path, slot: (await this.slotHeldBy(dir, children, token, true))?.path };
  }

  /**
   * The slot node among `children` of `dir` whose data is `token`, read in one round trip.
   * `bestEffort`: a read that fails counts as not ours (a cleanup); otherwise it fails the lookup
   * (a claim must not take a second slot because it could not see its first).
   */
  private async slotHeldBy(
    dir: string,
    children: readonly string[],
    token: string,
    bestEffort: boolean,
  ): Promise<{ slot: number; path: string; stat: ZkStat } | undefined> {
    const slots = children.filter((child) => slotOf(child) !== undefined);
    const owned = await Promise.all(
      this.session.batch(() =>
        slots.map((child) => {
          const read = this.ownSlot(`${dir}/${child}`, token);
          return bestEffort ? read.catch(() => undefined) : read;
        }),
      ),
    );
    const i = owned.findIndex((stat) => stat !== undefined);
    if (i < 0) return undefined;
    return { slot: slotOf(slots[i])!, path: `${dir}/${slots[i]}`, stat: owned[i]! };
  }

  private async removeQuietly(
    dir: string,
    token: string,
    known?: string,
    generation?: number,
  ): Promise<void> {
    const node = known === undefined ? undefined : { path: known };
    await this.removeOwn(dir, token, node, generation).catch(() => undefined);
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
    /** A slot claim of this node got no answer: its slot may exist, found by its token. */
    maybeSlot: boolean,
  ): Promise<void> {
    const leaving = this.removeOwn(dir, token, { path, maybeSlot }, generation).catch(() => false);
    await withTimeout(leaving, LEAVE_QUEUE_WAIT_MS).catch(() => undefined);
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

/** A node this process holds. */
interface HeldNode {
  readonly key: string;
  readonly token: string;
  /** Its queue node. */
  readonly path: string;
  /** A counted lock's slot node. */
  readonly slot?: string;
}

/** What a deletion of our nodes knows of them (see `removeOwn`). */
interface KnownNode {
  /** Our queue node. */
  readonly path: string;
  /** Our slot node (a counted lock's grant). */
  readonly slot?: string;
  /** A slot claim got no answer: look for a slot of ours. */
  readonly maybeSlot?: boolean;
}

/** One read of a key's queue for a node of ours (see `readQueue`). */
interface QueueRead {
  readonly place: QueuePlace;
  /** Our node's stat (`null`: it was gone). */
  readonly stat: ZkStat | null;
  /** Every child of the key node. */
  readonly names: readonly string[];
}

function heldKey(key: string, token: string): string {
  return `${key}\u0000${token}`;
}

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
