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

/** Prefix of the nodes one acquisition creates (Curator's "protected" mode: `_c_<id>-`). */
export function nodePrefix(token: string): string {
  return `_c_${token}-lock-`;
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
 * Where one lock node stands in its key's queue: `first` (it holds), `behind` another (the one
 * to watch), or `gone` (not in the queue: its session was replaced, or it was deleted).
 */
export type QueuePlace =
  | { readonly kind: 'first' }
  | { readonly kind: 'behind'; readonly predecessor: string }
  | { readonly kind: 'gone' };

/**
 * Where `own` stands among `children` (in any order), in one pass and without sorting: a
 * waiter needs only the node just ahead of it, and it reads the queue on every wake-up, so a
 * sort per read would cost n log n per hand-off where n is all that is needed.
 */
export function placeInQueue(children: readonly string[], own: string): QueuePlace {
  const ownSeq = sequenceOf(own);
  let present = false;
  let predecessor: string | undefined;
  let predecessorSeq = -1;
  for (const name of children) {
    if (name === own) {
      present = true;
      continue;
    }
    if (!isLockNode(name)) continue;
    const seq = sequenceOf(name);
    if (seq < ownSeq && seq > predecessorSeq) {
      predecessor = name;
      predecessorSeq = seq;
    }
  }
  if (!present) return { kind: 'gone' };
  return predecessor === undefined ? { kind: 'first' } : { kind: 'behind', predecessor };
}

/** A czxid (8-byte big-endian buffer or number) as a JS number: the fence. */
export function zxidToNumber(zxid: Buffer | number): number {
  return typeof zxid === 'number' ? zxid : Number(zxid.readBigUInt64BE(0));
}
