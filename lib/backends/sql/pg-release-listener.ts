import { createHash } from 'node:crypto';
import type { SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';
import type { ReleaseNotices } from './release-notices';
import type { SqlDataSource } from './typeorm-types';

/** Bound on connecting the listening client when the pool's options set none, ms. */
const CONNECT_TIMEOUT_MS = 10_000;
/** First and longest delay before the listener connects again after losing its connection, ms. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5_000;

/** The parts of a `pg` Client the listener uses. */
export interface PgListenClient {
  connect(): Promise<unknown>;
  query(sql: string): Promise<unknown>;
  end(): Promise<unknown>;
  on(event: 'notification', listener: (message: PgNotification) => void): unknown;
  on(event: 'error' | 'end', listener: (err?: unknown) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

/** A notification as `pg` reports it. */
export interface PgNotification {
  readonly channel: string;
  readonly payload?: string;
}

/**
 * The channel a lock table's releases are announced on: `ndl_<table>`, or for a name too long
 * for an identifier, `ndl_` and a digest of it. Notifications are per database, so every process
 * using the table in this database hears them (same-named tables of other schemas share the
 * channel: a waiter then wakes for nothing now and then, never misses one).
 */
export function releaseChannel(tableName: string): string {
  const plain = `ndl_${tableName}`;
  if (plain.length <= 63) return plain;
  return `ndl_${createHash('sha256').update(tableName, 'utf8').digest('hex').slice(0, 59)}`;
}

/**
 * Announces that `key` was just freed (PostgreSQL): `pg_notify` on the table's channel with the
 * stored key as payload, in autocommit, so listeners hear it at once. Best effort: the release
 * itself already succeeded, and a waiter that misses it only waits for its fallback timer.
 */
export async function announceRelease(db: SqlDatabase, key: string): Promise<void> {
  await db
    .exec('SELECT pg_notify(?, ?) AS sent', [releaseChannel(db.tableName), storedKey(key)])
    .catch(() => undefined);
}

/**
 * A new `pg` Client made like the DataSource's own (TypeORM's PostgreSQL driver keeps a `pg`
 * Pool as `driver.master`, whose options and Client class are what it connects with), but
 * outside the pool: a listening connection is held for the life of the backend and must not
 * cost the app one of its pooled connections. `undefined` when the driver is not laid out so
 * (the waiters then poll).
 */
export function pgClientFactory(dataSource: SqlDataSource): (() => PgListenClient) | undefined {
  const pool = (dataSource.driver as { master?: unknown } | undefined)?.master as
    | { options?: Record<string, unknown>; Client?: new (options: object) => PgListenClient }
    | undefined;
  const Client = pool?.Client;
  const options = pool?.options;
  if (typeof Client !== 'function' || typeof options !== 'object' || options === null) {
    return undefined;
  }
  return () => {
    const own: Record<string, unknown> = {
      ...options,
      // An idle listener on a dead TCP connection would otherwise never notice.
      keepAlive: true,
      connectionTimeoutMillis: options.connectionTimeoutMillis || CONNECT_TIMEOUT_MS,
    };
    // pg keeps the password off the enumerable properties (a dumped config never shows it); so
    // does this copy.
    Object.defineProperty(own, 'password', {
      value: options.password,
      enumerable: false,
      writable: true,
      configurable: true,
    });
    return new Client(own);
  };
}

/**
 * One `LISTEN` connection per backend (PostgreSQL `table`): a release announced on the table's
 * channel (by any process) is told to the backend's {@link ReleaseNotices}, which wakes the
 * waiters of that key. Connected on the first wait, closed by `close()`; when the connection drops, it
 * connects again (backing off up to 5 s) and wakes every waiter once, since a release announced
 * meanwhile was not heard. Waiters keep a fallback timer throughout: a missed notification costs
 * latency, never a lock. Errors are reported through `warn`, already redacted.
 */
export class PgReleaseListener {
  private client?: PgListenClient;
  /** The client being connected, so close() can end it. */
  private pending?: PgListenClient;
  private connecting?: Promise<boolean>;
  private up = false;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;
  private retries = 0;
  /** Whether the last attempt failed (one warning per outage, not one per retry). */
  private failing = false;

  constructor(
    /** Where the releases heard are told (the backend's waiters wait there). */
    private readonly notices: ReleaseNotices,
    private readonly newClient: () => PgListenClient,
    private readonly channel: string,
    /** A driver error as a redacted text. */
    private readonly describe: (err: unknown) => string,
    /** Reports a problem (already redacted), once per outage. */
    private readonly warn: (message: string) => void,
  ) {}

  /** Whether `LISTEN` is in place now (a release announced now will be heard). */
  get listening(): boolean {
    return this.up;
  }

  /**
   * Connects and listens if it does not yet: `true` once listening, `false` when it could not
   * (it then tries again in the background, and until then this answers `false` at once).
   * Never rejects.
   */
  start(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.up) return Promise.resolve(true);
    // Failing: the retry timer paces the attempts, not the waiters that come meanwhile.
    if (this.retryTimer) return Promise.resolve(false);
    if (!this.connecting) {
      const connecting = this.connect();
      this.connecting = connecting;
      void connecting.finally(() => {
        if (this.connecting === connecting) this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  /** Stops listening for good: ends the connection (or the attempt under way) and any retry. */
  async close(): Promise<void> {
    this.closed = true;
    this.up = false;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const clients = [this.client, this.pending].filter((c): c is PgListenClient => c !== undefined);
    this.client = undefined;
    this.pending = undefined;
    await Promise.all(clients.map((client) => endQuietly(client)));
    await this.connecting;
    this.notices.fireAll();
  }

  private async connect(): Promise<boolean> {
    let client: PgListenClient;
    try {
      client = this.newClient();
    } catch (err) {
      this.failed(err);
      return false;
    }
    this.pending = client;
    // Attached before connecting: an 'error' event without a listener would crash the process.
    client.on('error', (err) => this.dropped(client, err));
    client.on('end', () => this.dropped(client));
    client.on('notification', (message) => this.heard(message));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch (err) {
      if (this.pending === client) this.pending = undefined;
      await endQuietly(client);
      if (!this.closed) this.failed(err);
      return false;
    }
    if (this.pending === client) this.pending = undefined;
    if (this.closed) {
      await endQuietly(client);
      return false;
    }
    this.client = client;
    this.up = true;
    this.retries = 0;
    this.failing = false;
    // A release announced while nobody listened went unheard: every waiter looks once more.
    this.notices.fireAll();
    return true;
  }

  /** The connection closed or failed: wake the waiters (they fall back to polling) and reconnect. */
  private dropped(client: PgListenClient, err?: unknown): void {
    if (this.client !== client) return; // an attempt that failed: connect() handles it
    this.client = undefined;
    this.up = false;
    client.removeAllListeners('notification');
    void endQuietly(client);
    if (this.closed) return;
    this.failed(err ?? new Error('the connection closed'));
    this.notices.fireAll();
  }

  private failed(err: unknown): void {
    if (!this.failing) {
      this.failing = true;
      this.warn(
        `release notifications unavailable (${this.describe(err)}); table waiters poll until they are back`,
      );
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.closed || this.retryTimer) return;
    const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(this.retries, 10));
    this.retries++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.start();
    }, delay);
    this.retryTimer.unref(); // a listener alone is no reason for the process to stay up
  }

  private heard(message: PgNotification): void {
    if (message.channel !== this.channel || message.payload === undefined) return;
    this.notices.fire(message.payload);
  }
}

/** Ends a client, whatever state it is in (connecting included), without rejecting. */
async function endQuietly(client: PgListenClient): Promise<void> {
  await client.end().catch(() => undefined);
}
