import { createHash } from 'node:crypto';

/** Longest encoded key kept readable; longer ones are named by their digest. */
const MAX_READABLE = 200;

/**
 * A znode name for any key: ZooKeeper forbids `/`, `.`/`..` and control or private-use
 * characters in names, so everything but `[A-Za-z0-9_-]` is %-encoded (UTF-8). Prefixes keep the
 * two forms apart: `k_<encoded>` while short, `h_<sha256>` for long keys, so names never collide.
 */
export function encodeKey(key: string): string {
  const encoded = Array.from(Buffer.from(key, 'utf8'), (b) =>
    (b >= 0x30 && b <= 0x39) ||
    (b >= 0x41 && b <= 0x5a) ||
    (b >= 0x61 && b <= 0x7a) ||
    b === 0x5f ||
    b === 0x2d
      ? String.fromCharCode(b)
      : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
  ).join('');
  if (encoded.length <= MAX_READABLE) return `k_${encoded}`;
  return `h_${createHash('sha256').update(key).digest('base64url')}`;
}

/**
 * How a lock node shares its key, read from its name: a mutex (`lock`: exclusive, 1 permit),
 * a reader (`read`: shared, 1 permit) or one request of a counted lock (`sem<N>`: exclusive,
 * N permits). The kind lives in the name so that one `getChildren` tells every waiter the whole
 * queue (no data read per node).
 */
export interface NodeKind {
  readonly shared: boolean;
  readonly permits: number;
}

/** The mutex kind (also that of a lock node this library did not write, to be safe). */
export const MUTEX: NodeKind = { shared: false, permits: 1 };
/** The reader kind. */
export const READER: NodeKind = { shared: true, permits: 1 };

/** The kind of node a request creates (`permits` above 1 is never shared: validation refuses it). */
export function kindOfRequest(mode: 'exclusive' | 'shared' | undefined, permits = 1): NodeKind {
  if (mode === 'shared') return READER;
  return permits === 1 ? MUTEX : { shared: false, permits };
}

/** The name segment of a kind: `lock`, `read` or `sem<N>`. */
function segmentOf(kind: NodeKind): string {
  if (kind.permits !== 1) return `sem${kind.permits}`;
  return kind.shared ? 'read' : 'lock';
}

/**
 * Prefix of the nodes one acquisition creates (Curator's "protected" mode: `_c_<id>-`), then
 * the kind: `_c_<token>-lock-` for a mutex, as before shared and counted locks existed.
 */
export function nodePrefix(token: string, kind: NodeKind = MUTEX): string {
  return `_c_${token}-${segmentOf(kind)}-`;
}

/** Start of every node name of `token`, whatever its kind (to find it after a lost reply). */
export function tokenPrefix(token: string): string {
  return `_c_${token}-`;
}

/** The token of a mutex's lock node (`_c_<token>-lock-<sequence>`). */
export function mutexTokenOf(name: string): string {
  return name.slice(3, name.length - '-lock-'.length - 10);
}

/** Sequence number of a lock node name (the 10-digit suffix ZooKeeper appends). */
export function sequenceOf(name: string): number {
  return Number(name.slice(-10));
}

/** Whether a child of a key node is a lock node (ours, or any Curator-style protected one). */
function isLockNode(name: string): boolean {
  return name.startsWith('_c_') && /\d{10}$/.test(name);
}

/**
 * The kind of a child of a key node, or `undefined` when it is no lock node (a slot node).
 * Compares characters in place rather than slicing: every waiter runs it over the whole queue
 * at every wake-up. A lock node of an unknown kind counts as a mutex: it then excludes
 * everyone, never lets more in.
 */
export function kindOf(name: string): NodeKind | undefined {
  if (!isLockNode(name)) return undefined;
  const end = name.length - 11; // the '-' before the sequence
  if (name.charCodeAt(end) !== DASH) return MUTEX;
  if (name.charCodeAt(end - 5) === DASH) {
    if (name.startsWith('read', end - 4)) return READER;
    if (name.startsWith('lock', end - 4)) return MUTEX;
  }
  const start = name.lastIndexOf('-', end - 1) + 1;
  if (!name.startsWith('sem', start)) return MUTEX;
  const permits = Number(name.slice(start + 3, end));
  return Number.isInteger(permits) && permits > 1 ? { shared: false, permits } : MUTEX;
}

const DASH = 0x2d;

/**
 * Lock nodes of a key, in queue order (by sequence, not by name: tokens differ). Each name's
 * sequence is parsed once, not in every comparison: with 1,000 waiters the comparator's slices
 * were most of the client's CPU.
 */
export function sortLockNodes(children: readonly string[]): string[] {
  return children
    .filter(isLockNode)
    .map((name) => ({ name, seq: sequenceOf(name) }))
    .sort((a, b) => a.seq - b.seq)
    .map((n) => n.name);
}

/**
 * Name of slot `i` of a counted lock: a plain (not sequential) ephemeral node beside the queue,
 * so ZooKeeper itself refuses a second holder of one slot (NODE_EXISTS). Its data is the
 * holder's token.
 */
export function slotName(slot: number): string {
  return `slot-${slot}`;
}

/** The slot a child of a key node stands for, or `undefined` when it is no slot node. */
export function slotOf(name: string): number | undefined {
  if (!name.startsWith('slot-')) return undefined;
  const slot = Number(name.slice(5));
  return Number.isInteger(slot) && slot >= 0 ? slot : undefined;
}

/** Slots held among a key node's children, ascending. */
export function slotsIn(children: readonly string[]): number[] {
  const slots: number[] = [];
  for (const name of children) {
    const slot = slotOf(name);
    if (slot !== undefined) slots.push(slot);
  }
  return slots.sort((a, b) => a - b);
}

/** A czxid (8-byte big-endian buffer or number) as a JS number: the fence. */
export function zxidToNumber(zxid: Buffer | number): number {
  return typeof zxid === 'number' ? zxid : Number(zxid.readBigUInt64BE(0));
}
