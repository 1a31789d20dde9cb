/** ZooKeeper's code for "no connection" (`Exception.CONNECTION_LOSS` of node-zookeeper-client). */
export const CONNECTION_LOSS = -4;
/** ZooKeeper's code for refused credentials (`Exception.AUTH_FAILED`). */
export const AUTH_FAILED = -115;

/** Error raised for a request that got no answer in time (treated like CONNECTION_LOSS). */
export class ZkTimeoutError extends Error {
  override readonly name = 'ZkTimeoutError';
}

/** What a {@link ZkUnavailableError} copies from its socket error: what failed, never data. */
const SOCKET_FIELDS = ['code', 'errno', 'syscall', 'address', 'port', 'hostname'] as const;

/** The socket error behind a failed connection, as Node reports it. */
export interface SocketError extends Error {
  code?: string;
  errno?: number;
  syscall?: string;
  address?: string;
  port?: number;
  hostname?: string;
}

/**
 * The ensemble cannot be reached and the client knows why: every server of the connection
 * string refused or dropped the connection, or the server refused the credentials. The message
 * starts with the ZooKeeper code name and says what each server did
 * (`CONNECTION_LOSS: ECONNREFUSED 127.0.0.1:2199`); `code`, `errno`, `syscall`, `address` and
 * `port` are the latest socket failure's (the fields a redacted cause keeps), and `cause` is
 * that socket error itself. `sent` says whether the request had gone out (its reply was lost,
 * so it may have happened) or was refused before anything was sent.
 */
export class ZkUnavailableError extends Error {
  override readonly name = 'ZkUnavailableError';
  // `declare`: only the fields the socket error has become own properties (no `undefined`s).
  /** Node's code of the latest socket failure (`ECONNREFUSED`, `ENOTFOUND`...). */
  declare readonly code?: string;
  /** Its errno. */
  declare readonly errno?: number;
  /** The system call that failed (`connect`, `getaddrinfo`). */
  declare readonly syscall?: string;
  /** The address tried. */
  declare readonly address?: string;
  /** The port tried. */
  declare readonly port?: number;
  /** The host name a DNS lookup failed for. */
  declare readonly hostname?: string;

  constructor(
    message: string,
    /** `CONNECTION_LOSS` or `AUTH_FAILED` (what `getCode()` answers, like a client error). */
    private readonly zkCode: number,
    /** Whether the request had been sent when the connection went. */
    readonly sent: boolean,
    socketError?: SocketError,
  ) {
    super(message, socketError ? { cause: socketError } : undefined);
    for (const field of SOCKET_FIELDS) {
      if (socketError?.[field] !== undefined) Object.assign(this, { [field]: socketError[field] });
    }
  }

  /** The ZooKeeper code, as node-zookeeper-client's own errors report it. */
  getCode(): number {
    return this.zkCode;
  }
}
