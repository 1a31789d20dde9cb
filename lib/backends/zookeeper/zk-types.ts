/**
 * The part of `node-zookeeper-client` (1.1.x) used by the backend, typed locally: the package
 * ships no typings, and it is an optional peer loaded only when a zookeeper backend is set up.
 */

/** `stat` of a znode; zxids are 8-byte big-endian buffers in this client. */
export interface ZkStat {
  czxid: Buffer | number;
  /** Zxid of the last creation or deletion of a child. */
  pzxid: Buffer | number;
  /** Session id owning an ephemeral node (8-byte buffer). */
  ephemeralOwner?: Buffer | number;
  /** Zxid of the last change of the node's data. */
  mzxid?: Buffer | number;
  /** Number of changes of the node's data (a counted lock's node: above 0 once admitted). */
  version?: number;
}

/** A node's children with its own stat, from one reply. */
export interface ZkChildren {
  names: string[];
  stat: ZkStat;
}

/** A watcher event. */
export interface ZkEvent {
  getType(): number;
  getName(): string;
}

/** An error from the client; `getCode()` is one of `Exception` codes. */
export interface ZkError extends Error {
  getCode?(): number;
  code?: number;
}

type Callback<T> = (error: ZkError | null, result: T, stat?: ZkStat) => void;

/** A client instance. */
export interface ZkClient {
  connect(): void;
  close(): void;
  getSessionTimeout(): number;
  getSessionId(): Buffer;
  getState(): { name: string; code: number };
  addAuthInfo(scheme: string, auth: Buffer): void;
  on(event: 'state', listener: (state: { name: string; code: number }) => void): unknown;
  once(event: 'connected' | 'expired' | 'authenticationFailed', listener: () => void): unknown;
  removeAllListeners(): unknown;
  create(
    path: string,
    data: Buffer | null,
    acls: unknown[],
    mode: number,
    cb: Callback<string>,
  ): void;
  mkdirp(
    path: string,
    data: Buffer | null,
    acls: unknown[],
    mode: number,
    cb: Callback<string>,
  ): void;
  remove(path: string, version: number, cb: (error: ZkError | null) => void): void;
  exists(
    path: string,
    watcher: ((e: ZkEvent) => void) | undefined,
    cb: Callback<ZkStat | null>,
  ): void;
  getChildren(
    path: string,
    watcher: ((e: ZkEvent) => void) | undefined,
    cb: Callback<string[]>,
  ): void;
  /** Reads a node's data; `watcher` is armed only when the node exists. */
  getData(
    path: string,
    watcher: ((e: ZkEvent) => void) | undefined,
    cb: Callback<Buffer | null>,
  ): void;
  /** A multi-op request (one round trip, applied atomically). */
  transaction(): ZkTransaction;
}

/** The multi-op builder (batched renewal, and the slots of counted locks). */
export interface ZkTransaction {
  check(path: string, version?: number): ZkTransaction;
  create(path: string, data: Buffer | null, acls: unknown[], mode: number): ZkTransaction;
  setData(path: string, data: Buffer | null, version?: number): ZkTransaction;
  remove(path: string, version?: number): ZkTransaction;
  /**
   * Sends the ops together. On failure `error` is the first failing op's, and `results` (when
   * the server answered) has one entry per op: `err` 0 before the failing op, its code on it,
   * RUNTIME_INCONSISTENCY (-2) after it.
   */
  commit(
    callback: (
      error: ZkError | null,
      results?: ReadonlyArray<{ err?: number; stat?: ZkStat }>,
    ) => void,
  ): void;
}

/** The module's exports used here. */
export interface ZkModule {
  createClient(
    connectionString: string,
    options: { sessionTimeout: number; spinDelay?: number; retries?: number },
  ): ZkClient;
  CreateMode: { PERSISTENT: number; EPHEMERAL: number; EPHEMERAL_SEQUENTIAL: number };
  ACL: { OPEN_ACL_UNSAFE: unknown[]; CREATOR_ALL_ACL: unknown[] };
  Exception: {
    NO_NODE: number;
    NODE_EXISTS: number;
    NOT_EMPTY: number;
    CONNECTION_LOSS: number;
    SESSION_EXPIRED: number;
    OPERATION_TIMEOUT: number;
    NO_AUTH: number;
  };
  State: {
    SYNC_CONNECTED: { code: number };
    DISCONNECTED: { code: number };
    EXPIRED: { code: number };
    AUTH_FAILED: { code: number };
  };
}

/** Numeric code of a client error (NaN when it is not a ZooKeeper error). */
export function zkCode(err: unknown): number {
  const e = err as ZkError | null;
  if (e && typeof e.getCode === 'function') return e.getCode();
  return typeof e?.code === 'number' ? e.code : NaN;
}
