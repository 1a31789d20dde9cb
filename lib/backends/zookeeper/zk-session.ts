import { Logger } from '@nestjs/common';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { withTimeout } from '../../core/shared/timers';
import { Pulse, sleepUntilWoken, type WakeSource } from '../../core/shared/wake-up';
import { ZkConnectionState } from './zk-connection-state';
import { AUTH_FAILED, ZkTimeoutError, ZkUnavailableError } from './zk-errors';
import {
  zkCode,
  type ZkChildren,
  type ZkClient,
  type ZkError,
  type ZkEvent,
  type ZkModule,
  type ZkStat,
  type ZkTransaction,
} from './zk-types';

/** Settings of a session. */
export interface ZkSessionOptions {
  connectionString: string;
  sessionTimeout: number;
  auth: ReadonlyArray<{ scheme: string; credentials: string }>;
  /** Path probed for liveness (the lock root). */
  probePath: string;
  label: string;
  /** Scrubs the configuration's secrets from every line the session logs. */
  redactor: SecretRedactor;
}

/**
 * What a request does while the client has no connection. `'fail-fast'` (the default): wait for
 * a reconnection under way, but fail at once with the reason ({@link ZkUnavailableError}) once
 * the ensemble is known down; for calls that start something (acquire, isLocked, inspect,
 * ping). `'reconnect'`: wait for the connection to come back (bounded by the session timeout);
 * for what keeps or cleans up a session's own nodes (renewal, release), which may still
 * succeed if the ensemble answers again before the session expires.
 */
export type ConnectionWait = 'fail-fast' | 'reconnect';

/**
 * What bootstrap does when the ensemble does not answer: `undefined` waits `connectTimeout` for
 * a connection, then goes on; `'degraded'` goes on as soon as the ensemble is known down;
 * `'fail'` rejects then (see `ZookeeperBackendConfig.startup`).
 */
export type ZkStartup = 'fail' | 'degraded' | undefined;

/**
 * One live ZooKeeper session at a time, with what `node-zookeeper-client` lacks: a liveness
 * timer (the client has no read timeout and notices a dead server late), a fresh client when
 * the session expires or cannot be trusted any more, and the reason the ensemble is down
 * ({@link ZkConnectionState}) so requests fail at once instead of waiting on a client that
 * retries for ever. `onSessionLost` fires when held ephemeral nodes must be considered gone.
 */
export class ZkSession {
  private client!: ZkClient;
  private state!: ZkConnectionState;
  private generationCount = 0;
  /** Send time of the newest request that got a reply: the server knew us alive then. */
  private lastAckSentAt = monotonicNow();
  private probeTimer?: NodeJS.Timeout;
  private checkTimer?: NodeJS.Timeout;
  private closed = false;
  /** Set once per outage, so "ZooKeeper unreachable" is logged once, not per attempt. */
  private reportedDown = false;
  /** While bootstrap waits for the first connection (it logs the outcome itself). */
  private starting = false;
  /** Wakes whoever waits for the connection state (or the session) to change. */
  private readonly change = new Pulse();
  private readonly logger = new Logger('LockService');
  private sessionLostListener: (reason: string) => void = () => undefined;
  /** Whether anything depends on the session right now (only then is silence a loss). */
  hasHolders: () => boolean = () => false;

  constructor(
    private readonly zk: ZkModule,
    private readonly options: ZkSessionOptions,
  ) {}

  /**
   * Wake source told at every change of connection state and when the session is replaced
   * (see {@link generation}), for waits that must not outlive the connection they rely on.
   */
  readonly changes: WakeSource = this.change.source;

  /** Registers the listener told that held nodes are gone. */
  onSessionLost(listener: (reason: string) => void): void {
    this.sessionLostListener = listener;
  }

  /** The timeout the server granted (falls back to the requested one before connecting). */
  get sessionTimeout(): number {
    const negotiated = this.client?.getSessionTimeout();
    return negotiated && negotiated > 0 ? negotiated : this.options.sessionTimeout;
  }

  /** Id of the current session (8 bytes), to tell our current nodes from an abandoned session's. */
  get sessionId(): Buffer | undefined {
    try {
      const id = this.client?.getSessionId();
      // All zeros until the first connect: no session yet.
      return Buffer.isBuffer(id) && id.some((b) => b !== 0) ? id : undefined;
    } catch {
      return undefined;
    }
  }

  /** Number of the current client: it changes when a session is given up for a new one. */
  get generation(): number {
    return this.generationCount;
  }

  /**
   * Whether ephemeral nodes created under `generation` may still exist: that session was not
   * given up, and the server heard from it less than a session timeout ago (it expires a
   * session no sooner than that after it last heard from the client).
   */
  mayStillLive(generation: number): boolean {
    return (
      generation === this.generationCount &&
      monotonicNow() - this.lastAckSentAt < this.sessionTimeout
    );
  }

  /** Why the ensemble is known down right now, or `undefined`. */
  unavailable(): ZkUnavailableError | undefined {
    return this.state.unavailable();
  }

  /**
   * Creates the first client and waits up to `waitMs` for it to connect (it keeps trying after);
   * with a `startup` policy, only until the ensemble is known down, and `'fail'` then rejects
   * with the reason (the session closed).
   */
  async start(waitMs: number, startup: ZkStartup): Promise<void> {
    this.starting = true;
    this.newClient();
    this.startLiveness();
    try {
      await this.connected(waitMs, startup !== undefined);
    } catch (err) {
      this.starting = false;
      if (startup === 'fail') {
        await this.close();
        throw err;
      }
      this.reportedDown = true;
      this.write(
        'warn',
        startup === 'degraded'
          ? `ZooKeeper not reachable at ${this.options.connectionString} (${this.why(err)}); starting degraded: lock calls fail at once until it answers`
          : `ZooKeeper not reachable yet at ${this.options.connectionString} (${this.why(err)}); retrying in the background`,
      );
    }
    this.starting = false;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.probeTimer);
    clearInterval(this.checkTimer);
    this.change.fire();
    this.client.removeAllListeners();
    this.client.close();
  }

  // ---- promisified requests; each bounded by the session timeout -------------------------------

  create(path: string, acls: unknown[], mode: number): Promise<string> {
    return this.request<string>((c, cb) => c.create(path, null, acls, mode, cb));
  }

  mkdirp(path: string, acls: unknown[]): Promise<string> {
    return this.request<string>((c, cb) =>
      c.mkdirp(path, null, acls, this.zk.CreateMode.PERSISTENT, cb),
    );
  }

  remove(path: string, wait: ConnectionWait = 'fail-fast'): Promise<void> {
    return this.request<void>((c, cb) => c.remove(path, -1, (err) => cb(err, undefined)), wait);
  }

  exists(
    path: string,
    watcher?: (e: ZkEvent) => void,
    wait: ConnectionWait = 'fail-fast',
  ): Promise<ZkStat | null> {
    return this.request<ZkStat | null>((c, cb) => c.exists(path, watcher, cb), wait);
  }

  getChildren(path: string, wait: ConnectionWait = 'fail-fast'): Promise<string[]> {
    return this.request<string[]>((c, cb) => c.getChildren(path, undefined, cb), wait);
  }

  /**
   * Arms `watcher` on `path` (told of its deletion or change) with a data read, as Curator does:
   * unlike `exists`, a read of a missing node (NO_NODE) leaves no watch behind, where an `exists`
   * would keep one waiting for a creation that never comes (a sequential node's name is never
   * reused) in the client and the server for the whole session.
   */
  watchNode(path: string, watcher: (e: ZkEvent) => void): Promise<ZkStat | undefined> {
    return this.request<ZkStat | undefined>((c, cb) =>
      c.getData(path, watcher, (err, _data, stat) => cb(err, stat)),
    );
  }

  /** Arms `watcher` on the children of `path` (told of the next change) and reads them. */
  watchChildren(path: string, watcher: (e: ZkEvent) => void): Promise<string[]> {
    return this.request<string[]>((c, cb) => c.getChildren(path, watcher, cb));
  }

  /** A node's data and stat. */
  getData(
    path: string,
    wait: ConnectionWait = 'fail-fast',
  ): Promise<{ data: Buffer | null; stat: ZkStat }> {
    return this.request<{ data: Buffer | null; stat: ZkStat }>(
      (c, cb) => c.getData(path, undefined, (err, data, stat) => cb(err, { data, stat: stat! })),
      wait,
    );
  }

  /**
   * Applies the operations `build` adds, all or none, in one round trip: the per-op results, or
   * the first failing op's error (NO_NODE, NODE_EXISTS...).
   */
  commit(
    build: (tx: ZkTransaction) => void,
    wait: ConnectionWait = 'fail-fast',
  ): Promise<ReadonlyArray<{ stat?: ZkStat }>> {
    return this.request<ReadonlyArray<{ stat?: ZkStat }>>((c, cb) => {
      const tx = c.transaction();
      build(tx);
      tx.commit((err, results) => cb(err, results ?? []));
    }, wait);
  }

  /**
   * Whether each of `paths` exists, asked in one round trip (a multi of existence checks):
   * `true`, `false` (no such node), or `undefined` when the server stopped at an earlier missing
   * node and did not look (ask again for those). Rejects when there was no answer at all.
   */
  existAll(paths: readonly string[], wait: ConnectionWait): Promise<(boolean | undefined)[]> {
    return this.request<(boolean | undefined)[]>((c, cb) => {
      const tx = c.transaction();
      for (const path of paths) tx.check(path, -1);
      tx.commit((err, results) => {
        // No per-op results: the request itself failed (connection), not one of the checks.
        if (!results) return cb(err ?? new Error('ZooKeeper multi: no results'), []);
        if (!err)
          return cb(
            null,
            paths.map(() => true),
          );
        const answers = paths.map((_, i): boolean | undefined => {
          const code = results[i]?.err ?? 0;
          if (code === 0) return true;
          if (code === this.zk.Exception.NO_NODE) return false;
          return undefined; // RUNTIME_INCONSISTENCY: not checked
        });
        cb(null, answers);
      });
    }, wait);
  }

  /**
   * Sends the requests `send` makes in one socket write (the socket is corked meanwhile): a
   * pipelined pair then costs one write system call, not two. Requests that wait for a
   * connection are sent later as usual.
   */
  batch<T>(send: () => T): T {
    const socket = (this.client as unknown as { connectionManager?: ConnectionManagerInternals })
      .connectionManager?.socket;
    if (typeof socket?.cork !== 'function' || typeof socket.uncork !== 'function') return send();
    socket.cork();
    try {
      return send();
    } finally {
      socket.uncork();
    }
  }

  /** Children of `path` with its own stat, read together (one reply: a consistent pair). */
  children(path: string): Promise<ZkChildren> {
    return this.request<ZkChildren>((c, cb) =>
      c.getChildren(path, undefined, (err, names, stat) => cb(err, { names, stat: stat! })),
    );
  }

  private async request<T>(
    send: (client: ZkClient, cb: (err: ZkError | null, result: T) => void) => void,
    wait: ConnectionWait = 'fail-fast',
  ): Promise<T> {
    if (this.closed) throw new Error('ZooKeeper session closed');
    const timeout = this.sessionTimeout;
    if (!this.state.isConnected) await this.connected(timeout, wait === 'fail-fast');
    const sentAt = monotonicNow();
    const { client, state } = this;
    const reply = new Promise<T>((resolve, reject) => {
      send(client, (err, result) => {
        // A reply, even an error reply (NO_NODE...), proves the server heard this session at
        // `sentAt`; connection errors and AUTH_FAILED are produced locally and prove nothing.
        const local = err && (this.isConnectionError(err) || zkCode(err) === AUTH_FAILED);
        if (!local) this.acked(sentAt);
        if (err) reject(state.explain(err));
        else resolve(result);
      });
    });
    return withTimeout(reply, timeout, {
      onTimeout: () => new ZkTimeoutError(`no reply within ${timeout} ms`),
    });
  }

  /**
   * Waits until the current client is connected, at most `timeoutMs`; with `failFast`, rejects
   * at once when the ensemble is known down. Refused credentials reject in any case: the client
   * never reconnects after them.
   */
  private async connected(timeoutMs: number, failFast: boolean): Promise<void> {
    const deadline = monotonicNow() + timeoutMs;
    for (;;) {
      if (this.closed) throw new Error('ZooKeeper session closed');
      const state = this.state;
      if (state.isConnected) return;
      const down = state.unavailable();
      if (down && (failFast || down.getCode() === AUTH_FAILED)) throw down;
      const left = deadline - monotonicNow();
      if (left <= 0) {
        const last = state.lastReason();
        throw new ZkTimeoutError(
          `not connected within ${Math.round(timeoutMs)} ms${last ? ` (last: ${last})` : ''}`,
        );
      }
      await this.nextChange(left);
    }
  }

  /** Resolves at the next change of connection state (or client), or after `maxMs`. */
  private nextChange(maxMs: number): Promise<void> {
    return sleepUntilWoken(maxMs, undefined, [this.changes]);
  }

  /**
   * Errors the client makes up itself when it has no answer (nothing reached us; worth a retry
   * once connected again). Not AUTH_FAILED: refused credentials are refused for good.
   */
  isConnectionError(err: unknown): boolean {
    const code = zkCode(err);
    const { CONNECTION_LOSS, SESSION_EXPIRED, OPERATION_TIMEOUT } = this.zk.Exception;
    return (
      err instanceof ZkTimeoutError ||
      code === CONNECTION_LOSS ||
      code === SESSION_EXPIRED ||
      code === OPERATION_TIMEOUT
    );
  }

  private acked(sentAt: number): void {
    if (sentAt > this.lastAckSentAt) this.lastAckSentAt = sentAt;
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  private newClient(): void {
    const generation = ++this.generationCount;
    const client = this.zk.createClient(this.options.connectionString, {
      sessionTimeout: this.options.sessionTimeout,
      spinDelay: 100,
      retries: 0,
    });
    guardPacketParser(client);
    const state = new ZkConnectionState(() => {
      if (generation === this.generationCount) this.stateChanged(state);
    });
    state.observe(client);
    for (const { scheme, credentials } of this.options.auth) {
      client.addAuthInfo(scheme, Buffer.from(credentials));
    }
    client.on('state', (zkState) => {
      if (generation !== this.generationCount || this.closed) return;
      if (zkState.code === this.zk.State.SYNC_CONNECTED.code) {
        this.lastAckSentAt = monotonicNow();
        if (this.reportedDown) this.write('log', 'connected to ZooKeeper');
        this.reportedDown = false;
        state.markConnected();
      } else if (zkState.code === this.zk.State.DISCONNECTED.code) {
        // Suspended: the session may survive a reconnect; the liveness timer decides.
        const why = state.lastReason();
        this.write(
          'warn',
          `disconnected from ZooKeeper${why ? ` (${why})` : ''}; locks are kept while the session can live (${this.sessionTimeout} ms)`,
        );
        state.markDisconnected();
      } else if (zkState.code === this.zk.State.EXPIRED.code) {
        this.replace('ZooKeeper session expired');
      } else if (zkState.code === this.zk.State.AUTH_FAILED.code) {
        this.write(
          'error',
          "ZooKeeper refused the session's credentials (AUTH_FAILED); lock calls fail until the app is restarted with credentials it accepts",
        );
        state.markAuthRefused();
      }
    });
    this.client = client;
    this.state = state;
    client.connect();
  }

  /** Logs the first time the ensemble is known down in an outage, and wakes waiting callers. */
  private stateChanged(state: ZkConnectionState): void {
    const down = state.unavailable();
    if (down && !this.reportedDown && !this.starting) {
      this.reportedDown = true;
      this.write(
        'warn',
        `ZooKeeper unreachable (${down.message}); lock calls fail at once until it answers`,
      );
    }
    this.change.fire();
  }

  /**
   * Gives up on the current session (held nodes are lost) and starts a new one. Used when a node
   * of ours could not be deleted: only the end of the session is then sure to remove it.
   */
  abandon(reason: string): void {
    this.replace(reason);
  }

  /** Declares held nodes lost and starts over with a new client (and so a new session). */
  private replace(reason: string): void {
    if (this.closed) return;
    const text = this.options.redactor.text(reason);
    this.write('warn', `${text}; held locks are lost, reconnecting with a new session`);
    this.sessionLostListener(text);
    const old = this.client;
    old.removeAllListeners();
    // Closing sends closeSession if the server is reachable, dropping our ephemeral nodes now.
    old.close();
    this.newClient();
    this.lastAckSentAt = monotonicNow();
    this.change.fire();
  }

  private startLiveness(): void {
    const timeout = (): number => this.sessionTimeout;
    // A cheap request every third of the session timeout keeps a fresh "server heard us" time.
    this.probeTimer = setInterval(
      () => {
        void this.exists(this.options.probePath).catch(() => undefined);
      },
      Math.max(50, timeout() / 3),
    );
    this.probeTimer.unref();
    this.checkTimer = setInterval(
      () => {
        if (this.closed || !this.hasHolders()) return;
        const silentFor = monotonicNow() - this.lastAckSentAt;
        // The server expires the session no sooner than `timeout` after it last heard from us,
        // and it heard us no earlier than `lastAckSentAt`: give up a little before that point.
        if (silentFor >= timeout() * 0.9) {
          const why = this.state.lastReason();
          this.replace(
            `no reply from ZooKeeper for ${Math.round(silentFor)} ms (session timeout ${timeout()} ms)${why ? `: ${why}` : ''}`,
          );
        }
      },
      Math.max(20, Math.min(200, timeout() / 20)),
    );
    this.checkTimer.unref();
  }

  /** A log line about this backend, scrubbed of the configuration's secrets. */
  private write(level: 'log' | 'warn' | 'error', message: string): void {
    this.logger[level](this.options.redactor.text(`${this.options.label}: ${message}`));
  }

  private why(err: unknown): string {
    return this.options.redactor.message(err);
  }
}

/** The connection manager internals touched by {@link guardPacketParser} and `batch` (1.1.x). */
interface ConnectionManagerInternals {
  pendingBuffer: Buffer | null;
  socket?: { destroy(): void; cork?(): void; uncork?(): void };
  onSocketData(buffer: Buffer): void;
  onSocketConnected(...args: unknown[]): void;
}

/**
 * Works around a node-zookeeper-client 1.1.x defect: the buffer holding a partly received
 * packet is never cleared when the socket drops, so after a reconnect the new server's bytes
 * are glued to stale ones, misparsed, and the parser throws from a socket handler (an uncaught
 * exception that would crash the app). Clear it on every new socket, and turn a parse failure
 * into a reconnect instead of a crash.
 */
function guardPacketParser(client: ZkClient): void {
  const manager = (client as unknown as { connectionManager?: ConnectionManagerInternals })
    .connectionManager;
  if (!manager || typeof manager.onSocketData !== 'function') return;
  const parse = manager.onSocketData;
  const connected = manager.onSocketConnected;
  manager.onSocketConnected = function (this: ConnectionManagerInternals, ...args: unknown[]) {
    this.pendingBuffer = null;
    return connected.apply(this, args);
  };
  manager.onSocketData = function (this: ConnectionManagerInternals, buffer: Buffer) {
    try {
      parse.call(this, buffer);
    } catch {
      this.pendingBuffer = null;
      this.socket?.destroy(); // the client reconnects and resumes the session
    }
  };
}
