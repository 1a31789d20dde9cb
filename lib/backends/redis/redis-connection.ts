import { Logger } from '@nestjs/common';
import type { SecretRedactor } from '../../core/contract/backend-factory';
import { monotonicNow } from '../../core/shared/clock';
import { withTimeout } from '../../core/shared/timers';
import type { ConnectionPort } from './port/redis-port';

/** Repeats of one connection error logged at most this often. */
const ERROR_LOG_INTERVAL_MS = 30_000;
/** Fields of a client error that say what failed (no data): copied onto the error callers get. */
const WHAT_FAILED = ['code', 'errno', 'syscall', 'address', 'port'] as const;

/** A call in flight (see `RedisConnection.run`); `prev === this` once it is off the list. */
interface PendingCall {
  prev: PendingCall | undefined;
  next: PendingCall | undefined;
  /** Fails the call (with the reason the connection dropped). */
  readonly reject: (err: unknown) => void;
  /** The call's own promise, for a late reply to undo when it was failed that way. */
  readonly sent: Promise<unknown>;
  readonly onAbandoned: ((late: Promise<never>) => void) | undefined;
}

/** Whose connection errors a {@link RedisConnection} logs. */
export type ConnectionLogging =
  /** A client the module created: every connection error, as a (redacted) warning. */
  | 'always'
  /**
   * A client the user passed in: only while the user added no error listener of their own (the
   * library would otherwise print them raw, and our listener silences that).
   */
  | 'unhandled';

/**
 * Raised instead of sending a command on a client known to be disconnected: it names the
 * endpoint and why (`connect ECONNREFUSED 127.0.0.1:6390`, `WRONGPASS ...`, the connection
 * closing), keeps `code`/`errno`/`syscall`/`address`/`port` of the client's error and carries a
 * redacted copy of it as `cause` (never the client's own error, which can hold `AUTH` arguments).
 */
export class RedisNotConnectedError extends Error {
  /** The client error's code (`ECONNREFUSED`, `ENOTFOUND`...), when it had one. */
  code?: string | number;
  /** The client error's errno. */
  errno?: string | number;
  /** The system call that failed (`connect`, `getaddrinfo`). */
  syscall?: string | number;
  /** The address the client tried. */
  address?: string | number;
  /** The port the client tried. */
  port?: string | number;

  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'RedisNotConnectedError';
  }
}

/**
 * What a backend knows about one client connection, from its port's events: whether it is
 * known to be down and why. A client that has seen a connection error (or lost its connection)
 * since it was last ready is down: {@link RedisConnection.run} then fails a call at once with that
 * reason instead of leaving it in the client's offline queue until `operationTimeout` or the
 * retry limit ("Reached the max retries per request limit"), and calls already sent when the
 * connection drops are failed at once too. A client still making its first connection (no
 * error yet) is not down: its calls wait for it, bounded by the engine. It also logs the
 * client's connection errors, redacted and at most once per 30 s per message.
 */
export class RedisConnection {
  /** Why the client cannot carry a command, since it was last ready; undefined while usable. */
  private reason?: unknown;
  /** An error seen while ready: usually the reason of the `close` that follows it. */
  private lastError?: unknown;
  /**
   * Calls sent and not answered yet, failed at once if the connection drops: a list linked
   * through the calls themselves (adding and removing one allocates nothing, where a Set going
   * from one entry to none and back cost a share of every store call).
   */
  private inFlight?: PendingCall;
  private readonly downListeners = new Set<() => void>();
  private readonly readyListeners = new Set<() => void>();
  private readonly unwatch: () => void;
  private readonly logger = new Logger('LockService');
  private readonly lastLogged = new Map<string, number>();

  /** `host:port` (or the Cluster's seeds), as the messages name it; redacted. */
  readonly endpoint: string;

  constructor(
    private readonly port: ConnectionPort,
    private readonly redactor: SecretRedactor,
    /** Prefix of log lines, e.g. `redis backend "main"`. */
    private readonly label: string,
    private readonly logging: ConnectionLogging,
  ) {
    this.endpoint = redactor.text(port.endpoint);
    this.unwatch = port.watch({
      ready: () => {
        this.reason = undefined;
        this.lastError = undefined;
        for (const listener of [...this.readyListeners]) listener();
      },
      error: (err, nodeOnly) => {
        this.log(err);
        if (nodeOnly || this.port.isReady()) this.lastError = err;
        else this.markDown(err);
      },
      closed: () => this.markDown(this.lastError ?? this.reason ?? this.closed()),
      ended: () => this.markDown(this.reason ?? this.closed()),
    });
  }

  /** Known to be unable to carry a command now (see the class comment). */
  isDown(): boolean {
    return this.reason !== undefined && !this.port.isReady();
  }

  /**
   * Runs one store call: fails at once while the client is down, and fails a call already sent
   * as soon as the connection drops (the client would hold it for a reconnect). `onAbandoned` gets
   * the call's own promise when it was failed that way, for a late reply that must be undone.
   * `mapError` turns the call's own failure into what the caller rejects with.
   */
  run<T>(
    call: () => Promise<T>,
    onAbandoned?: (late: Promise<T>) => void,
    mapError?: (err: unknown) => unknown,
  ): Promise<T> {
    if (this.isDown()) return Promise.reject(this.error());
    const sent = call();
    return new Promise<T>((resolve, reject) => {
      const pending: PendingCall = {
        prev: undefined,
        next: this.inFlight,
        reject,
        sent,
        onAbandoned: onAbandoned as PendingCall['onAbandoned'],
      };
      if (this.inFlight) this.inFlight.prev = pending;
      this.inFlight = pending;
      sent.then(
        (value) => {
          if (this.settle(pending)) resolve(value);
        },
        (err: unknown) => {
          if (!this.settle(pending)) return;
          const fail = (): void => {
            // Down meanwhile: the client's own error ("Connection is closed.", the retry limit,
            // NOAUTH) says less than the reason we know.
            if (this.isDown()) reject(this.error());
            else reject(mapError ? mapError(err) : err);
          };
          // Failed before the connection was through its handshake: the handshake's own error
          // (WRONGPASS) may be reported just after the call's (node-redis answers a call sent
          // behind a refused AUTH with NOAUTH first); it is the cause worth naming.
          if (this.port.isReady()) fail();
          else setImmediate(fail);
        },
      );
    });
  }

  /** Takes a call off the in-flight list; `false` when it was already failed by a drop. */
  private settle(pending: PendingCall): boolean {
    if (pending.prev === pending) return false;
    if (pending.prev) pending.prev.next = pending.next;
    else this.inFlight = pending.next;
    if (pending.next) pending.next.prev = pending.prev;
    pending.prev = pending;
    return true;
  }

  /** Calls `listener` each time the client becomes ready; returns the unsubscribe function. */
  onReady(listener: () => void): () => void {
    this.readyListeners.add(listener);
    return () => this.readyListeners.delete(listener);
  }

  /** Calls `listener` each time the client goes down; returns the unsubscribe function. */
  onDown(listener: () => void): () => void {
    this.downListeners.add(listener);
    return () => this.downListeners.delete(listener);
  }

  /**
   * Resolves once the client is ready, is known to be down, or `timeoutMs` passed, whichever
   * comes first (never rejects): how long bootstrap waits for a node's first connection.
   */
  settled(timeoutMs: number): Promise<void> {
    if (this.port.isReady() || this.isDown()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        offReady();
        offDown();
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      const offReady = this.onReady(done);
      const offDown = this.onDown(done);
    });
  }

  /**
   * Resolves once a PING is answered within `timeoutMs`; rejects at once with the reason when
   * the client is or goes down (startup `'fail'`).
   */
  async ready(ping: () => Promise<unknown>, timeoutMs: number): Promise<void> {
    await withTimeout(this.run(ping), timeoutMs, {
      onTimeout: () => new Error(`no answer from ${this.endpoint} within ${timeoutMs} ms`),
    });
  }

  /** The error a call gets while the client is down. */
  error(): RedisNotConnectedError {
    const reason = this.reason;
    const err = new RedisNotConnectedError(
      `not connected to ${this.endpoint}: ${this.redactor.message(reason)}`,
      this.redactor.error(reason),
    );
    const source = (typeof reason === 'object' && reason !== null ? reason : {}) as Record<
      string,
      unknown
    >;
    for (const field of WHAT_FAILED) {
      const value = source[field];
      if (typeof value === 'number') err[field] = value;
      else if (typeof value === 'string') err[field] = this.redactor.text(value);
    }
    return err;
  }

  /** Removes this tracker's listeners (a client the user passed in outlives the backend). */
  detach(): void {
    this.unwatch();
  }

  private markDown(reason: unknown): void {
    this.reason = reason;
    this.lastError = undefined;
    if (this.inFlight) {
      const err = this.error();
      let pending: PendingCall | undefined = this.inFlight;
      this.inFlight = undefined;
      while (pending) {
        const next: PendingCall | undefined = pending.next;
        pending.prev = pending; // failed: its late answer is ignored
        pending.reject(err);
        pending.onAbandoned?.(pending.sent as Promise<never>);
        pending = next;
      }
    }
    for (const listener of [...this.downListeners]) listener();
  }

  /** The reason of a connection that closed without an error (the server went away). */
  private closed(): Error {
    return new Error('the connection closed');
  }

  /** One redacted warning per distinct message per {@link ERROR_LOG_INTERVAL_MS}. */
  private log(err: unknown): void {
    if (this.logging === 'unhandled' && this.port.userErrorListeners() > 0) return;
    const message = this.redactor.message(err);
    const now = monotonicNow(); // a wall-clock step must not silence or repeat warnings
    if (now - (this.lastLogged.get(message) ?? -Infinity) < ERROR_LOG_INTERVAL_MS) return;
    this.lastLogged.set(message, now);
    this.logger.warn(`${this.label}: ${message}`);
  }
}
