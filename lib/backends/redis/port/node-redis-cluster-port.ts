import {
  evalBatchWith,
  evalScriptWith,
  fromNodeRedis,
  RESP2_SHAPES,
  type SendCommand,
} from './node-redis-commands';
import type {
  ConnectionEvents,
  ConnectionPort,
  RedisPort,
  RedisScript,
  ScriptCall,
  SubscriberPort,
} from './redis-port';

/** A listener of a cluster's events, as the structural types below take it. */
type Listener = (...args: never[]) => void;

/** How often a watched cluster's state is read again (node-redis tells no recovery, see below). */
const POLL_MS = 100;
/** The delay before connecting again after the first connection reached no seed, by attempt. */
const reconnectDelay = (attempt: number): number => Math.min(50 * attempt, 1_000);

/**
 * The part of a node-redis 4, 5 or 6 Cluster (`createCluster()`) the adapter uses, typed
 * structurally so the module compiles without `redis` installed (it is an optional peer).
 */
export interface NodeRedisClusterLike {
  /** Routed by the slot of `firstKey` (a random node without one), following MOVED and ASK. */
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
    options?: object,
  ): Promise<unknown>;
  /** Between `connect()` (slot table read) and closing; false again when the first one failed. */
  readonly isOpen: boolean;
  /** The masters of the slot table, each with its node client once made (4: a promise first). */
  readonly masters: ReadonlyArray<{ readonly client?: unknown }>;
  /** The node client carrying SUBSCRIBE, once one was asked for. */
  readonly pubSubNode?: { readonly client?: unknown };
  /** node-redis 5 and 6 (4 keeps its options private). */
  readonly _options?: NodeRedisClusterOptions;
  duplicate(overrides?: object): NodeRedisClusterLike;
  connect(): Promise<unknown>;
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  /** A node's client, by its entry in the slot table (how a Cluster is told from a client). */
  nodeClient(node: unknown): unknown;
  on(event: string, listener: Listener): unknown;
  removeListener(event: string, listener: Listener): unknown;
  listenerCount(event: string): number;
  /** node-redis 5 and 6. */
  close?(): Promise<unknown>;
  /** node-redis 5 and 6. */
  destroy?(): void;
  /** node-redis 4 (5 and 6: deprecated, as `close`). */
  quit?(): Promise<unknown>;
  /** node-redis 4 (5 and 6: deprecated, as `destroy`). */
  disconnect?(): Promise<unknown>;
}

/** The options of a node-redis 5 or 6 Cluster. */
export interface NodeRedisClusterOptions {
  readonly rootNodes?: ReadonlyArray<{
    readonly url?: string;
    readonly socket?: { readonly host?: string; readonly port?: number };
  }>;
  /** Options of every node client. */
  readonly defaults?: { readonly disableOfflineQueue?: boolean };
}

/** Whether `value` looks like a node-redis 4, 5 or 6 Cluster. */
export function isNodeRedisCluster(value: unknown): value is NodeRedisClusterLike {
  const c = value as Partial<NodeRedisClusterLike> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.sendCommand === 'function' &&
    typeof c.nodeClient === 'function' &&
    typeof c.duplicate === 'function' &&
    typeof c.connect === 'function' &&
    typeof c.isOpen === 'boolean' &&
    Array.isArray(c.masters)
  );
}

/** How a cluster port treats the Cluster it wraps. */
export interface NodeRedisClusterPortOptions {
  /**
   * The port connects the Cluster itself, now, and again after a delay while no seed answers
   * (node-redis gives up after one round of its seeds); `close()` stops it. It also listens to
   * the Cluster's errors from now on, so none is ever unhandled. For Clusters the module makes.
   */
  readonly connect?: boolean;
  /** Its seeds, for `endpoint` (node-redis 4 does not show them). */
  readonly seeds?: readonly string[];
}

/** A node client of a Cluster: only its state is read. */
interface NodeClientState {
  readonly isReady?: unknown;
}

/**
 * A node-redis Cluster's state, as {@link ConnectionPort} tells it. node-redis has no state of
 * the Cluster as a whole and emits none of its nodes' recoveries (4 forwards their errors only,
 * 5 their first `ready` only), so the state is derived from the node clients: ready while the
 * Cluster is open and one of them is (one node's outage leaves the others' slots usable), read
 * on each Cluster event and every {@link POLL_MS} ms while watched.
 */
abstract class NodeRedisClusterConnection implements ConnectionPort {
  readonly endpoint: string;
  private ownListeners = 0;
  private connecting = false;
  private closing = false;
  private retry?: NodeJS.Timeout;
  private wake?: () => void;
  /** Settles once the port's own connecting succeeded or stopped (at once without it). */
  protected readonly connected: Promise<void>;

  constructor(
    protected readonly nodeRedis: NodeRedisClusterLike,
    readonly family: string,
    protected readonly options: NodeRedisClusterPortOptions,
  ) {
    this.endpoint = endpointOf(nodeRedis, options.seeds);
    if (options.connect) {
      nodeRedis.on('error', () => undefined);
      this.ownListeners++;
      this.connected = this.keepConnecting();
    } else {
      this.connected = Promise.resolve();
    }
  }

  /** The node clients whose state is the Cluster's (entries not made yet: undefined). */
  protected abstract nodes(): unknown[];

  isReady(): boolean {
    if (!this.nodeRedis.isOpen) return false;
    const clients = this.clients();
    // None made yet (`minimizeConnections`): the slot table is read, nodes connect on demand.
    if (clients.length === 0) return this.nodeRedis.masters.length > 0;
    return clients.some((c) => (c as NodeClientState).isReady === true);
  }

  watch(events: ConnectionEvents): () => void {
    let wasOpen = this.isOpen();
    let wasReady = this.isReady();
    const update = (): void => {
      const open = this.isOpen();
      const ready = this.isReady();
      if (ready && !wasReady) events.ready();
      else if (!ready && wasReady && open) events.closed();
      if (wasOpen && !open) events.ended();
      wasOpen = open;
      wasReady = ready;
    };
    const error = ((err: unknown) => {
      events.error(err);
      update();
    }) as Listener;
    // 'error': the seeds' and (4) every node's errors; 'node-error': a node's (5, 6).
    const listeners: Array<[string, Listener]> = [
      ['error', error],
      ['node-error', error],
      ...['connect', 'disconnect', 'node-ready', 'node-reconnecting', 'node-disconnect'].map(
        (event): [string, Listener] => [event, update],
      ),
    ];
    for (const [event, listener] of listeners) this.nodeRedis.on(event, listener);
    const poll = setInterval(update, POLL_MS);
    poll.unref();
    this.ownListeners++;
    return () => {
      clearInterval(poll);
      for (const [event, listener] of listeners) this.nodeRedis.removeListener(event, listener);
      this.ownListeners--;
    };
  }

  userErrorListeners(): number {
    return this.nodeRedis.listenerCount('error') - this.ownListeners;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.retry);
    this.wake?.();
    // Closed midway, a connect in flight would still make node clients (node-redis 4 and 5).
    await this.connected;
    const cluster = this.nodeRedis;
    if (!cluster.isOpen) return;
    // A node client that is down never answers the graceful close: only when all are up.
    const clients = this.clients();
    if (clients.every((c) => (c as NodeClientState).isReady === true)) {
      try {
        await (cluster.close ? cluster.close() : cluster.quit?.());
      } catch {
        // fall through to the hard close
      }
    }
    if (!cluster.isOpen) return;
    try {
      await (cluster.destroy ? cluster.destroy() : cluster.disconnect?.());
    } catch {
      // already closed meanwhile
    }
  }

  private clients(): unknown[] {
    return this.nodes().filter((c) => c !== undefined && c !== null);
  }

  /** Open, or being connected by this port: not ended. */
  private isOpen(): boolean {
    return this.nodeRedis.isOpen || this.connecting;
  }

  /** `connect()` until it succeeds or the port closes; failures reach the 'error' listeners. */
  private async keepConnecting(): Promise<void> {
    this.connecting = true;
    try {
      for (let attempt = 1; !this.closing; attempt++) {
        try {
          await this.nodeRedis.connect();
          return;
        } catch {
          // node-redis emitted why (each seed's error); it stays closed until connected again
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.retry = setTimeout(resolve, reconnectDelay(attempt));
        });
      }
    } finally {
      this.connecting = false;
    }
  }
}

/** {@link RedisPort} over a node-redis 4, 5 or 6 Cluster. */
export class NodeRedisClusterPort extends NodeRedisClusterConnection implements RedisPort {
  readonly cluster = true;
  private readonly send: SendCommand;

  /**
   * A Cluster not connected yet (`connect()` not called) is not ready and its calls fail with
   * node-redis's error for a closed client; `ready` comes once its owner connects it.
   */
  constructor(client: NodeRedisClusterLike, options: NodeRedisClusterPortOptions = {}) {
    super(client, 'node-redis', options);
    this.send = (args, routeKey) =>
      // Without a slot table node-redis fails on its own internals (4, 5: a TypeError).
      client.isOpen
        ? client.sendCommand(routeKey, false, args, RESP2_SHAPES).catch((err: unknown) => {
            throw fromNodeRedis(err);
          })
        : Promise.reject(new Error(`not connected to ${this.endpoint} (not yet, or closed)`));
  }

  /**
   * Whether the node clients queue commands while disconnected (`defaults.disableOfflineQueue`);
   * node-redis 4 shows it only on a node client, so `undefined` there before one is made.
   */
  get queuesOffline(): boolean | undefined {
    const options = this.nodeRedis._options;
    if (options !== undefined) return options.defaults?.disableOfflineQueue !== true;
    const node = this.nodes().find(
      (c): c is { options: { disableOfflineQueue?: unknown } } =>
        typeof (c as { options?: unknown } | undefined)?.options === 'object',
    );
    return node && node.options.disableOfflineQueue !== true;
  }

  evalScript(
    script: RedisScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return evalScriptWith(this.send, script, keys, args);
  }

  evalBatch(script: RedisScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
    return evalBatchWith(this.send, script, calls);
  }

  command(args: readonly string[], routeKey?: string): Promise<unknown> {
    return this.send([...args], routeKey);
  }

  /**
   * A duplicate Cluster that connects only the node it subscribes on (`minimizeConnections`),
   * connected by its port; node-redis subscribes that node client again after a reconnect.
   */
  subscriber(): SubscriberPort {
    return new NodeRedisClusterSubscriber(
      this.nodeRedis.duplicate({ minimizeConnections: true }),
      this.family,
      { connect: true, seeds: this.options.seeds },
    );
  }

  protected nodes(): unknown[] {
    return this.nodeRedis.masters.map((m) => m.client);
  }
}

/** A duplicate node-redis Cluster in subscriber mode: its state is its pub/sub node's. */
class NodeRedisClusterSubscriber extends NodeRedisClusterConnection implements SubscriberPort {
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<void> {
    await this.connected; // a Cluster picks its pub/sub node from the slot table it has read
    if (!this.nodeRedis.isOpen) throw new Error(`the subscriber of ${this.endpoint} is closed`);
    await this.nodeRedis
      .subscribe(channel, (message) => onMessage(message))
      .catch((err: unknown) => {
        throw fromNodeRedis(err);
      });
  }

  protected nodes(): unknown[] {
    const node = this.nodeRedis.pubSubNode;
    return node ? [node.client] : [];
  }
}

/** `cluster <seeds>`: the given seeds, the Cluster's root nodes, else its masters' addresses. */
function endpointOf(cluster: NodeRedisClusterLike, seeds: readonly string[] | undefined): string {
  const roots = cluster._options?.rootNodes?.map(
    (node) => node.url ?? `${node.socket?.host ?? 'localhost'}:${node.socket?.port ?? 6379}`,
  );
  const masters = cluster.masters
    .map((m) => (m as { address?: unknown }).address)
    .filter((a): a is string => typeof a === 'string');
  const known = seeds ?? roots ?? masters;
  return known.length > 0
    ? `cluster ${known.join(', ')}`
    : 'cluster (seeds not shown by node-redis 4)';
}
