import type { LockMode } from '../../core/contract/lock-backend';
import type { SqlDialect } from './sql-dialect';

/*
 * The rows of a key held `shared` or counted (`permits` above 1) by the `table` strategy, in the
 * lock table's existing columns (no schema change):
 *
 * - the key's own row (stored key = the key's digest, as for a mutex) is the key's header: its
 *   owner is a marker (`#shared:<r>` or `#permits:<n>`) instead of a token, its lease runs as long
 *   as the longest lease among the holders, its fence is the latest grant's. A mutex take (whose
 *   statements are unchanged) sees it held, so a mutex and these holders exclude each other.
 * - one holder row per holder: the slot rows `<stem>~s<i>` (i in 0..n-1: the slot is the row's
 *   primary key, so two holders can never have the same one) and the reader rows `<stem>~r<j>`
 *   (j in 0..r-1, `r` kept in the marker, so the key's readers are found by primary key); owner
 *   token, lease and fence each.
 * - the waiting-writer mark `<stem>~w`: a writer waiting for readers (owner: its token; a lease
 *   of its own, refreshed while it waits), which new readers respect (writer preference).
 *
 * `<stem>` is the first 56 characters of the key's digest: a holder row's key contains a `~` past
 * its start, so it is never a digest (a key's row) nor a reserved row (which begins with `~`),
 * while its first 8 characters put it in its key's fence bucket, as for every key row
 * (fence-layout.ts).
 * When the last holder leaves, every row of the key goes; rows of holders that died run out and
 * are deleted by the next holder of the key or by the backend's start-up sweep.
 */

/** Characters of the key's digest a holder row's stored key keeps. */
const STEM = 56;
/**
 * Between the stem and the row's tag: not a hex digit, so no key's row has such a key, and above
 * every hex digit in binary order, so on MariaDB (ascii_bin) a key's holder rows sort right after
 * the key's row: a statement locking the key's rows locks the key's row first, as the mutex take
 * does, which keeps lock orders alike.
 */
const SEPARATOR = '~';

/** What the header's marker says: the mode of the holders, and how many rows they may have. */
export interface HeldMarker {
  readonly mode: LockMode;
  /** `shared`: reader rows in use are among 0..count-1; `exclusive`: the permits (count of slot rows). */
  readonly count: number;
}

const MARKER = /(?:^|\/)#(shared|permits):(\d+)$/;

/** The header's owner for `marker` (SQLite: tagged with the boot, as a token would be). */
export function markerOwner(dialect: SqlDialect, marker: HeldMarker): string {
  const text = marker.mode === 'shared' ? `#shared:${marker.count}` : `#permits:${marker.count}`;
  return dialect.owner(text);
}

/** The marker a header's owner holds, or `undefined` for a mutex's token (or no owner). */
export function markerOf(owner: unknown): HeldMarker | undefined {
  const match = typeof owner === 'string' ? MARKER.exec(owner) : null;
  if (!match) return undefined;
  return { mode: match[1] === 'shared' ? 'shared' : 'exclusive', count: Number(match[2]) };
}

/** Stored key of holder row `index` of the key stored as `stored`, in `mode`. */
export function holderRow(stored: string, mode: LockMode, index: number): string {
  return `${stored.slice(0, STEM)}${SEPARATOR}${mode === 'shared' ? 'r' : 's'}${index}`;
}

/** Stored keys of every holder row the marker allows, index order. */
export function holderRows(stored: string, marker: HeldMarker): string[] {
  return Array.from({ length: marker.count }, (_, i) => holderRow(stored, marker.mode, i));
}

/** The index of a holder row from its stored key. */
export function holderIndex(row: string): number {
  return Number(row.slice(STEM + 2));
}

/** Stored key of the waiting-writer mark of the key stored as `stored`. */
export function writerMark(stored: string): string {
  return `${stored.slice(0, STEM)}${SEPARATOR}w`;
}
