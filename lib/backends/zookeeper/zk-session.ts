import { Logger } from '@nestjs/common';
import { monotonicNow } from '../../core/shared/clock';
import { withTimeout } from '../../core/shared/timers';
import {
  zkCode,
  type ZkClient,
  type ZkError,
  type ZkEvent,
  type ZkModule,
  type ZkStat,
} from './zk-types';

/** Settings of a session. */
export interface ZkSessionOptions {
  connectionString: string;
  sessionTimeout: number;
  auth: ReadonlyArray<{ scheme: string; credentials: string }>;
  /** Path probed for liveness (the lock root). */
  probePath: string;
  label: string;
}

/** Error raised for a request that got no answer in time (treated like CONNECTION_LOSS). */
export class ZkTimeoutError extends Error {}

/**
 * One live ZooKeeper session at a time, with what `node-zookeeper-client` lacks: a liveness
 * timer (the client has no read timeout and notices a dead server late), and a fresh client
 * when the session expires or cannot be trusted any more. `onSessionLost` fires when held
 * ephemeral nodes must be considered gone.
 */
export class ZkSession {
  private client!: ZkClient;
  private ready!: Promise<void>;
  private generation = 0;
  /** Send time of the newest request that got a reply: the server knew us alive then. */
  private lastAckSentAt = monotonicNow();
  private probeTimer?: NodeJS.Timeout;
  private checkTimer?: NodeJS.Timeout;
  private closed = false;
  private readonly logger = new Logger('LockService');
  private sessionLostListener: (reason: string) => void = () => undefined;
  /** Whether anything depends on the session right now (only then is silence a loss). */
  hasHolders: () => boolean = () => false;

  constructor(
    private readonly zk: ZkModule,
    private readonly options: ZkSessionOptions,
  ) {}

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

  /** Creates the first client and waits up to `waitMs` for it to connect (it keeps trying after). */
  async start(waitMs: number): Promise<void> {
    this.newClient();
    await withTimeout(this.ready, waitMs).catch(() => {
      this.logger.warn(
        `${this.options.label}: ZooKeeper not reachable yet at ${this.options.connectionString}; retrying in the background`,
      );
    });
    this.startLiveness();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.probeTimer);
    clearInterval(this.checkTimer);
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

  remove(path: string): Promise<void> {
    return this.request<void>((c, cb) => c.remove(path, -1, (err) => cb(err, undefined)));
  }

  exists(path: string, watcher?: (e: ZkEvent) => void): Promise<ZkStat | null> {
    return this.request<ZkStat | null>((c, cb) => c.exists(path, watcher, cb));
  }

  getChildren(path: string): Promise<string[]> {
    return this.request<string[]>((c, cb) => c.getChildren(path, undefined, cb));
  }

  private async request<T>(
    send: (client: ZkClient, cb: (err: ZkError | null, result: T) => void) => void,
  ): Promise<T> {
    if (this.closed) throw new Error('ZooKeeper session closed');
    const timeout = this.sessionTimeout;
    await withTimeout(this.ready, timeout, {
      onTimeout: () => new ZkTimeoutError(`not connected within ${timeout} ms`),
    });
    const sentAt = monotonicNow();
    const client = this.client;
    const reply = new Promise<T>((resolve, reject) => {
      send(client, (err, result) => {
        // A reply, even an error reply (NO_NODE...), proves the server heard this session at
        // `sentAt`; connection errors are produced locally and prove nothing.
        if (!err || !this.isConnectionError(err)) this.acked(sentAt);
        if (err) reject(err);
        else resolve(result);
      });
    });
    return withTimeout(reply, timeout, {
      onTimeout: () => new ZkTimeoutError(`no reply within ${timeout} ms`),
    });
  }

  /** Errors the client makes up itself when it has no answer (nothing reached us). */
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
    const generation = ++this.generation;
    const client = this.zk.createClient(this.options.connectionString, {
      sessionTimeout: this.options.sessionTimeout,
      spinDelay: 100,
      retries: 0,
    });
    guardPacketParser(client);
    for (const { scheme, credentials } of this.options.auth) {
      client.addAuthInfo(scheme, Buffer.from(credentials));
    }
    this.ready = new Promise<void>((resolve) => client.once('connected', () => resolve()));
    this.ready.catch(() => undefined);
    client.on('state', (state) => {
      if (generation !== this.generation || this.closed) return;
      if (state.code === this.zk.State.SYNC_CONNECTED.code) {
        this.lastAckSentAt = monotonicNow();
      } else if (state.code === this.zk.State.DISCONNECTED.code) {
        // Suspended: the session may survive a reconnect; the liveness timer decides.
        this.logger.warn(`${this.options.label}: disconnected from ZooKeeper (locks suspended)`);
        this.ready = new Promise<void>((resolve) => client.once('connected', () => resolve()));
        this.ready.catch(() => undefined);
      } else if (state.code === this.zk.State.EXPIRED.code) {
        this.replace('ZooKeeper session expired');
      } else if (state.code === this.zk.State.AUTH_FAILED.code) {
        this.logger.error(`${this.options.label}: ZooKeeper authentication failed`);
      }
    });
    this.client = client;
    client.connect();
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
    this.logger.warn(
      `${this.options.label}: ${reason}; held locks are lost, reconnecting with a new session`,
    );
    this.sessionLostListener(reason);
    const old = this.client;
    old.removeAllListeners();
    // Closing sends closeSession if the server is reachable, dropping our ephemeral nodes now.
    old.close();
    this.newClient();
    this.lastAckSentAt = monotonicNow();
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
          this.replace(
            `no reply from ZooKeeper for ${Math.round(silentFor)} ms (session timeout ${timeout()} ms)`,
          );
        }
      },
      Math.max(20, Math.min(200, timeout() / 20)),
    );
    this.checkTimer.unref();
  }
}

/** The connection manager internals touched by {@link guardPacketParser} (1.1.x). */
interface ConnectionManagerInternals {
  pendingBuffer: Buffer | null;
  socket?: { destroy(): void };
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
