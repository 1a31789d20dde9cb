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

/** Lock nodes of a key, in queue order (by sequence, not by name: tokens differ). */
export function sortLockNodes(children: readonly string[]): string[] {
  return children
    .filter((c) => c.startsWith('_c_') && /\d{10}$/.test(c))
    .sort((a, b) => sequenceOf(a) - sequenceOf(b));
}

/** A czxid (8-byte big-endian buffer or number) as a JS number: the fence. */
export function zxidToNumber(zxid: Buffer | number): number {
  return typeof zxid === 'number' ? zxid : Number(zxid.readBigUInt64BE(0));
}
