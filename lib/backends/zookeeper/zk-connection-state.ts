import { AUTH_FAILED, CONNECTION_LOSS, ZkUnavailableError, type SocketError } from './zk-errors';
import type { ZkClient } from './zk-types';

/** The connection manager internals observed here (node-zookeeper-client 1.1.x). */
interface ManagerInternals {
  servers: ReadonlyArray<{ host: string; port: number | string }>;
  /** Its own state: 1 = CONNECTING (no session on this socket yet), 2 = CONNECTED. */
  state: number;
  connectTimeout: number;
  sessionTimeout: number;
  socket?: { destroy(): void };
  findNextServer(callback: (server: { host: string; port: number | string }) => void): void;
  onSocketConnected(...args: unknown[]): void;
  onSocketError(error: Error): void;
  onSocketConnectTimeout(): void;
  onSocketClosed(hadError: boolean): void;
}

const MANAGER_CONNECTING = 1;
const MANAGER_CONNECTED = 2;

/** Why one server gave no session. */
interface Failure {
  readonly reason: string;
  readonly error?: SocketError;
}

/**
 * What one client knows about its connection to the ensemble: connected, or not and why.
 * node-zookeeper-client swallows socket errors and retries for ever, so a request made while
 * the ensemble is down would just wait; this watches each connection attempt (which server,
 * which socket error, a connect timeout, a close before any session) so a caller can be told at
 * once, and with the real reason, that the ensemble is known down: every server of the
 * connection string failed since the client last had a connection, or the server refused the
 * credentials (a permanent state: the client never reconnects after AUTH_FAILED).
 */
export class ZkConnectionState {
  private connected = false;
  /** Why each server failed since the last connection, by `host:port`. */
  private readonly failures = new Map<string, Failure>();
  private latest?: Failure;
  private authRefused = false;
  /** Distinct servers of the connection string. */
  private serverCount = 1;
  /** Why the last established connection closed (for requests it was carrying). */
  private closeReason?: Failure;

  constructor(
    /** Told of every change (connected, a failed attempt, refused credentials). */
    private readonly changed: () => void,
  ) {}

  /** Hooks `client`'s connection attempts; call before `connect()`. */
  observe(client: ZkClient): void {
    const manager = (client as unknown as { connectionManager?: ManagerInternals })
      .connectionManager;
    if (!manager || typeof manager.findNextServer !== 'function') return;
    this.serverCount = new Set(manager.servers.map((s) => `${s.host}:${s.port}`)).size || 1;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the hooks run as the manager
    const state = this;
    let server = '';
    let socketError: SocketError | undefined;
    let timedOut = false;
    let handshake: NodeJS.Timeout | undefined;
    const { findNextServer, onSocketConnected, onSocketError, onSocketConnectTimeout } = manager;
    const { onSocketClosed } = manager;
    // Instance properties: the manager binds these per socket, so the hooks see every attempt.
    manager.findNextServer = function (this: ManagerInternals, callback) {
      findNextServer.call(this, (next) => {
        server = `${next.host}:${next.port}`;
        socketError = undefined;
        timedOut = false;
        callback(next);
      });
    };
    // The client clears its connect timeout once TCP connects, then waits for the session
    // handshake for ever: a server that accepts but does not answer (frozen, or one that lost
    // the connection while starting: seen with ZooKeeper 3.8) would hang it. Bound the handshake
    // by the connect timeout, and by a third of the session timeout so a session can still be
    // resumed in time after one such hang; a destroyed socket makes the client try again.
    manager.onSocketConnected = function (this: ManagerInternals, ...args: unknown[]) {
      const socket = this.socket;
      clearTimeout(handshake);
      handshake = setTimeout(
        () => {
          if (this.socket !== socket || this.state !== MANAGER_CONNECTING) return;
          timedOut = true;
          socket?.destroy();
        },
        Math.min(this.connectTimeout, this.sessionTimeout / 3),
      );
      handshake.unref();
      onSocketConnected.apply(this, args);
    };
    manager.onSocketError = function (this: ManagerInternals, error: Error) {
      socketError = error;
      onSocketError.call(this, error);
    };
    manager.onSocketConnectTimeout = function (this: ManagerInternals) {
      timedOut = true;
      onSocketConnectTimeout.call(this);
    };
    manager.onSocketClosed = function (this: ManagerInternals, hadError: boolean) {
      clearTimeout(handshake);
      // Recorded before the manager fails the requests in flight, so they can say why.
      if (this.state === MANAGER_CONNECTING) {
        state.attemptFailed(server, describe(server, socketError, timedOut));
      } else if (this.state === MANAGER_CONNECTED) {
        state.closeReason = {
          reason: socketError
            ? `${socketError.code ?? socketError.message} ${server}`
            : `${server} closed the connection`,
          error: socketError,
        };
      }
      onSocketClosed.call(this, hadError);
    };
  }

  /** Whether the client has a connection with a session now. */
  get isConnected(): boolean {
    return this.connected;
  }

  /** The client connected (a session was established or resumed). */
  markConnected(): void {
    this.connected = true;
    this.failures.clear();
    this.latest = undefined;
    this.closeReason = undefined;
    this.changed();
  }

  /** The client lost its connection (it reconnects by itself). */
  markDisconnected(): void {
    this.connected = false;
    this.changed();
  }

  /** The server refused the credentials: the client will not reconnect. */
  markAuthRefused(): void {
    this.connected = false;
    this.authRefused = true;
    this.changed();
  }

  /**
   * Why the ensemble is known down, or `undefined` while it is connected or not yet known down
   * (a connection attempt is still under way).
   */
  unavailable(): ZkUnavailableError | undefined {
    if (this.connected) return undefined;
    if (this.authRefused) {
      return new ZkUnavailableError(
        'AUTH_FAILED: the server refused the session’s credentials (auth scheme unknown to it?)',
        AUTH_FAILED,
        false,
      );
    }
    if (this.failures.size < this.serverCount) return undefined;
    return new ZkUnavailableError(
      `CONNECTION_LOSS: ${[...this.failures.values()].map((f) => f.reason).join('; ')}`,
      CONNECTION_LOSS,
      false,
      this.latest?.error,
    );
  }

  /** The latest reason the client has no connection (for timeouts), if it knows one. */
  lastReason(): string | undefined {
    if (this.authRefused) return 'AUTH_FAILED';
    return this.latest?.reason ?? this.closeReason?.reason;
  }

  /**
   * `err` (a request's failure) with the reason the connection went, when it is the client's
   * bare CONNECTION_LOSS for a request in flight and the reason is known.
   */
  explain(err: unknown): unknown {
    const code = (err as { getCode?: () => number } | null)?.getCode?.();
    if (code !== CONNECTION_LOSS || err instanceof ZkUnavailableError) return err;
    const known = this.unavailable() ?? this.closeReason;
    if (!known) return err;
    if (known instanceof ZkUnavailableError) {
      return new ZkUnavailableError(known.message, CONNECTION_LOSS, true, this.latest?.error);
    }
    return new ZkUnavailableError(
      `CONNECTION_LOSS: ${known.reason}`,
      CONNECTION_LOSS,
      true,
      known.error,
    );
  }

  private attemptFailed(server: string, failure: Failure): void {
    this.failures.set(server, failure);
    this.latest = failure;
    this.changed();
  }
}

/** One failed attempt in words: `ECONNREFUSED 127.0.0.1:2199`, or what happened instead. */
function describe(server: string, error: SocketError | undefined, timedOut: boolean): Failure {
  if (timedOut) return { reason: `no answer from ${server} (connect timeout)` };
  if (error) return { reason: `${error.code ?? error.message} ${server}`, error };
  return { reason: `${server} closed the connection before a session was set up (not serving?)` };
}
