/**
 * CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses to map a
 * key to one of its 16384 hash slots. Computed here so the backend knows a lock key's slot
 * without asking the server: fence counters are bucketed by it (see `fence-buckets.ts`).
 */
export function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8'))
    crc = ((crc << 8) ^ TABLE[((crc >> 8) ^ byte) & 0xff]) & 0xffff;
  return crc;
}

/** Number of hash slots of a Redis Cluster. */
export const HASH_SLOTS = 16_384;

/** The Cluster hash slot of a hash tag (the text between a key's first `{` and `}`). */
export function hashSlot(tag: string): number {
  return crc16(tag) % HASH_SLOTS;
}

/** Byte-at-a-time lookup table of the polynomial. */
const TABLE: Uint16Array = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/**
 * The Cluster hash slot of a whole key, by Redis's rule: the CRC16 of the text between the first
 * `{` and the first `}` after it when that text is not empty, else of the whole key.
 */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return hashSlot(key.slice(open + 1, close));
  }
  return hashSlot(key);
}
