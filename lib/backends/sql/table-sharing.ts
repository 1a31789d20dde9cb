import type { GrantRequest, LockMode, StoreLockInfo } from '../../core/contract/lock-backend';
import { LockConfigError } from '../../errors/lock.errors';
import { bucketCreation, missingLayout } from './fence-counter';
import { bucketKey } from './fence-layout';
import {
  holderIndex,
  holderRow,
  holderRows,
  markerOf,
  markerOwner,
  writerMark,
  type HeldMarker,
} from './holder-rows';
import { releaseChannel } from './pg-release-listener';
import { affectedRows, type SqlDatabase } from './sql-database';
import { storedKey } from './sql-dialect';
import type { LeaseContention, LeaseGrant } from './sql-lock-strategy';
import { runScript, type SqlScript, type SqlStep } from './sql-script';

/*
 * The `table` strategy's shared and counted locks (rows: see holder-rows.ts), as scripts that
 * `runScript` runs atomically. Every script locks the rows it reads in one order: the key's fence
 * bucket (takes only: the mutex take locks it first too, so the grants of a key, whatever their
 * mode, are serialised with their fence draws and fences rise in grant order), then the key's
 * header and the writer mark, then the holder rows.
 */

/** Whether `request` is for a shared or counted lock (else: a mutex, the statements of old). */
export function isHolderRequest({ mode, permits }: GrantRequest): boolean {
  return (mode !== undefined && mode !== 'exclusive') || (permits !== undefined && permits !== 1);
}

/** One row as {@link rowsStep} reads it. */
interface RowState {
  readonly key: string;
  readonly owner: string | null;
  readonly live: boolean;
  readonly remaining: number;
  readonly expiresAt: number;
  readonly fence: number;
}

/**
 * Reader rows read with the key's row before its marker says how many there are: a key held by
 * this many readers or fewer costs one read.
 */
const READERS_GUESS = 8;

/** Rows read by one statement at most (well inside every driver's parameter limit). */
const READ_SLICE = 5_000;

/**
 * Takes a shared hold or a slot for `request` (mode `'shared'`, or `permits` above 1): `null`
 * when busy (held by a mutex or writer, every slot taken, or, for a reader, a writer waits).
 * Throws `LockConfigError` when the key's holders agreed on other `permits`. In one transaction:
 * the fence draw, one read of the key's rows, one write of the holder row and the key's row (and
 * a delete of rows whose lease ran out, when there are any).
 */
export function* takeHolder(db: SqlDatabase, request: GrantRequest): SqlScript<LeaseGrant | null> {
  const { key, token, ttlMs } = request;
  const mode: LockMode = request.mode ?? 'exclusive';
  const permits = request.permits ?? 1;
  const k = storedKey(key);
  const mark = writerMark(k);
  const fence = yield* drawFence(db, key);
  const guess = holderRows(k, { mode, count: mode === 'shared' ? READERS_GUESS : permits });
  const rows = yield* readKeyRows(db, [k, mark], guess, false);
  const header = rows.get(k);
  const held = header?.live ? markerOf(header.owner) : undefined;
  if (header?.live) {
    agree(key, held, permits);
    if (held?.mode !== mode) return null; // a mutex, or a writer beside readers
  }
  // A writer waits (for the readers, or for the key it was just told is free): readers wait too.
  if (mode === 'shared' && rows.get(mark)?.live) return null;
  let index = 0;
  if (held) {
    const slots = holderRows(k, held);
    yield* readMissing(db, rows, slots);
    index = slots.findIndex((slot) => !rows.get(slot)?.live);
    if (index < 0 && mode === 'exclusive') return null;
    if (index < 0) index = slots.length;
  }
  // Rows whose lease ran out (holders or a writer that died, or all of them when the key is
  // free) are deleted, those of an earlier hold its marker still names too: so a key's rows go
  // once its holders have, even those of holders that died.
  const row = holderRow(k, mode, index);
  const stale = header && !held ? markerOf(header.owner) : undefined;
  const expired = new Set(
    [...rows.values()].filter((r) => !r.live && r.key !== k).map((r) => r.key),
  );
  for (const slot of stale ? holderRows(k, stale) : []) expired.add(slot);
  expired.delete(row);
  if (expired.size > 0) yield deleteStep(db, [...expired]);
  const count = mode === 'shared' ? Math.max(held?.count ?? 0, index + 1) : permits;
  yield upsertStep(db, ttlMs, fence, [
    [row, key, db.dialect.owner(token)],
    [k, key, markerOwner(db.dialect, { mode, count })],
  ]);
  return { fence, permit: mode === 'shared' ? 0 : index };
}

/**
 * Renews, in one transaction, each holder row of `requests` (a key and a token each) to `ttlMs`
 * if it still holds its key (its lease and the key header's still running), and the header's
 * lease with it (the header runs as long as the longest lease among its holders); per request, whether it was renewed: `false` for a key held by a mutex, or no
 * longer by this token. Statements: the reads of {@link readHeldKeys} and one update, however
 * many holders and keys there are.
 */
export function* renewHolders(
  db: SqlDatabase,
  ttlMs: number,
  requests: ReadonlyArray<Pick<GrantRequest, 'key' | 'token'>>,
): SqlScript<boolean[]> {
  const { table, dialect } = db;
  const stored = requests.map((request) => storedKey(request.key));
  // One lock order for every transaction on several keys: theirs, sorted.
  const keys = [...new Set(stored)].sort();
  const rows = yield* readHeldKeys(db, keys);
  const slots = new Map(keys.map((k) => [k, heldRows(rows, k)]));
  const headers = new Set<string>();
  const mine = new Set<string>();
  const renewed = requests.map((request, i) => {
    const owner = dialect.owner(request.token);
    const row = slots.get(stored[i])?.find((slot) => rows.get(slot)?.owner === owner);
    if (!row || !rows.get(row)?.live) return false;
    headers.add(stored[i]);
    mine.add(row);
    return true;
  });
  if (mine.size === 0) return renewed;
  // A header runs exactly as long as the longest lease among its holders: the renewed ones get
  // `ttlMs` from now, the others keep theirs (read above, locked). So a holder renewed to less
  // than before (lockAtLeastFor's last lease) shortens the header too; kept at its old
  // expiry, it held writers out long after the last holder's lease ran out.
  const longestOther = new Map<string, number>();
  for (const k of headers) {
    const others = (slots.get(k) ?? [])
      .filter((slot) => !mine.has(slot) && rows.get(slot)?.live)
      .map((slot) => rows.get(slot)!.expiresAt);
    if (others.length > 0) longestOther.set(k, Math.max(...others));
  }
  const until = `${dialect.nowMs} + ?`;
  const kept = [...longestOther].map(() => 'WHEN ? THEN ?').join(' ');
  yield {
    sql:
      longestOther.size === 0
        ? `UPDATE ${table} SET expires_at = ${until} WHERE lock_key IN (${marks([...headers, ...mine])})`
        : `UPDATE ${table} SET expires_at = ${dialect.greatest(until, `CASE lock_key ${kept} ELSE ${until} END`)} WHERE lock_key IN (${marks([...headers, ...mine])})`,
    params:
      longestOther.size === 0
        ? [ttlMs, ...headers, ...mine]
        : [ttlMs, ...[...longestOther].flat(), ttlMs, ...headers, ...mine],
  };
  return renewed;
}

/**
 * Releases the holder row of `token`: `true` when its lease was still running, `false` when it
 * had run out, `undefined` when the key has no holder row of `token` (not a shared or counted
 * holder). The last holder out deletes the key's header and every row left; otherwise the
 * header's lease shrinks to the longest left. PostgreSQL: the release is announced to every
 * process's waiters in the same statement (delivered when the transaction commits).
 */
export function* releaseHolder(
  db: SqlDatabase,
  key: string,
  token: string,
): SqlScript<boolean | undefined> {
  const { table, dialect } = db;
  const k = storedKey(key);
  const rows = yield* readKeyRows(db, [k], guessBoth(k), true);
  const header = rows.get(k);
  const held = header ? markerOf(header.owner) : undefined;
  if (!header || !held) return undefined;
  const slots = holderRows(k, held);
  yield* readMissing(db, rows, slots);
  const owner = dialect.owner(token);
  const mine = slots.map((slot) => rows.get(slot)).find((row) => row?.owner === owner);
  if (!mine) return undefined;
  const present = slots.flatMap((slot) => rows.get(slot) ?? []);
  const others = header.live ? present.filter((row) => row !== mine && row.live) : [];
  const gone = present.filter((row) => row === mine || !row.live).map((row) => row.key);
  const released = header.live && mine.live;
  // PostgreSQL: the write announces the release to every process's waiters (on commit).
  const announced = (step: SqlStep): SqlStep =>
    released && dialect.family === 'postgres'
      ? {
          sql: `WITH w AS (${step.sql}) SELECT pg_notify(?, ?) AS sent`,
          params: [...step.params, releaseChannel(db.tableName), k],
        }
      : step;
  if (others.length === 0) {
    yield announced(deleteStep(db, [...gone, k]));
    return released;
  }
  yield deleteStep(db, gone);
  // Readers: the rows in use shrink to the highest one left, so later reads look at fewer.
  const count =
    held.mode === 'shared'
      ? Math.max(...others.map((row) => holderIndex(row.key))) + 1
      : held.count;
  yield announced({
    sql: `UPDATE ${table} SET owner = ?, expires_at = ? WHERE lock_key = ?`,
    params: [
      markerOwner(dialect, { mode: held.mode, count }),
      Math.max(...others.map((row) => row.expiresAt)),
      k,
    ],
  });
  return released;
}

/** Frees the key whoever holds it, every holder row with it; `true` when it was held. */
export function* forceReleaseKey(db: SqlDatabase, key: string): SqlScript<boolean> {
  const k = storedKey(key);
  const header = (yield* readRows(db, [k], true)).get(k);
  if (!header?.live) return false;
  const held = markerOf(header.owner);
  yield deleteStep(db, held ? [...holderRows(k, held), k] : [k]);
  return true;
}

/**
 * A waiter looks at the key after a failed take: the lease left on it, and for a mutex (a writer)
 * whose key readers hold, its mark as the key's waiting writer (unless another writer's mark is
 * there), with a lease of `ttlMs` that it refreshes at each look, so new readers wait behind it.
 * A mutex finding the key held as a counted lock is a `permits` disagreement
 * (`LockConfigError`). A plain read first: a key held by another mutex (the usual contention)
 * costs one statement, as the look at the lease always did.
 */
export async function contend(db: SqlDatabase, request: GrantRequest): Promise<LeaseContention> {
  const permits = request.permits ?? 1;
  const k = storedKey(request.key);
  // A counted lock's waiter wakes when the first slot's lease runs out, not the last.
  const slots = permits > 1 ? holderRows(k, { mode: 'exclusive', count: permits }) : [];
  const rows = await readNow(db, [k, writerMark(k), ...slots]);
  const header = rows.get(k);
  if (!header?.live) return { marked: false };
  const held = markerOf(header.owner);
  agree(request.key, held, permits);
  const first = slots.flatMap((slot) => (rows.get(slot)?.live ? [rows.get(slot)!.remaining] : []));
  if (first.length > 0) return { remainingMs: Math.min(...first), marked: false };
  if (held?.mode !== 'shared' || isHolderRequest(request)) {
    return { remainingMs: header.remaining, marked: false };
  }
  return runScript(db, () => markWriter(db, request));
}

/** Removes the writer mark of `token` from `key`; `true` when there was one. */
export async function withdraw(db: SqlDatabase, key: string, token: string): Promise<boolean> {
  const result = await db.exec(`DELETE FROM ${db.table} WHERE lock_key = ? AND owner = ?`, [
    writerMark(storedKey(key)),
    db.dialect.owner(token),
  ]);
  return affectedRows(result) > 0;
}

/**
 * What a held shared or counted key's rows say (`header`: its row, held, with a marker): holders,
 * their mode, permits and slots, the latest holder's fence, the lease left on the key.
 */
export async function inspectHolders(
  db: SqlDatabase,
  key: string,
  marker: HeldMarker,
  remainingMs: number,
): Promise<StoreLockInfo> {
  const rows = [...(await readNow(db, holderRows(storedKey(key), marker))).values()].filter(
    (row) => row.live,
  );
  if (rows.length === 0) return { held: false, fence: null, holders: 0 };
  return {
    held: true,
    fence: Math.max(...rows.map((row) => row.fence)),
    remainingMs,
    holders: rows.length,
    mode: marker.mode,
    permits: marker.mode === 'shared' ? 1 : marker.count,
    slots: rows
      .map((row) => (marker.mode === 'shared' ? 0 : holderIndex(row.key)))
      .sort((a, b) => a - b),
  };
}

/** {@link contend}'s write: the mark, if readers still hold the key and no other writer marked it. */
function* markWriter(db: SqlDatabase, request: GrantRequest): SqlScript<LeaseContention> {
  const k = storedKey(request.key);
  const mark = writerMark(k);
  const rows = yield* readRows(db, [k, mark], true);
  const header = rows.get(k);
  if (!header?.live) return { marked: false };
  if (markerOf(header.owner)?.mode !== 'shared') {
    return { remainingMs: header.remaining, marked: false };
  }
  const owner = db.dialect.owner(request.token);
  const current = rows.get(mark);
  if (current?.live && current.owner !== owner) {
    return { remainingMs: header.remaining, marked: false };
  }
  yield upsertStep(db, request.ttlMs, 0, [[mark, request.key, owner]]);
  return { remainingMs: header.remaining, marked: true };
}

/**
 * The key's holders and waiters must agree on `permits` (a mutex and readers: 1): else a
 * `LockConfigError`, as on every backend (admitting it under either count would let more in than
 * one of them allows).
 */
function agree(key: string, held: HeldMarker | undefined, permits: number): void {
  const agreed = held?.mode === 'exclusive' ? held.count : 1;
  if (agreed === permits) return;
  throw new LockConfigError(
    'permits',
    `"${key}" is held with permits: ${agreed}, this request asks for ${permits}: every holder ` +
      'and waiter of a key must ask the same permits',
  );
}

/**
 * Draws the next fence from the key's bucket (created at the layout's floor if missing), its row
 * locked to the end of the transaction.
 */
function* drawFence(db: SqlDatabase, key: string): SqlScript<number> {
  const { table, dialect } = db;
  const index = db.fences.bucketOf(key);
  const bucket = bucketKey(index);
  const returning = dialect.family === 'mysql' ? '' : ' RETURNING fence';
  for (let attempt = 0; attempt < 2; attempt++) {
    const bump = yield {
      sql: `UPDATE ${table} SET fence = fence + 1 WHERE lock_key = ?${returning}`,
      params: [bucket],
    };
    if (bump.affected === 1) {
      if (returning) return Number(bump.records[0].fence);
      const read = yield { sql: `SELECT fence FROM ${table} WHERE lock_key = ?`, params: [bucket] };
      return Number(read.records[0].fence);
    }
    yield bucketCreation(db, index);
  }
  throw missingLayout(db);
}

/**
 * Reads `keys`' rows, locked `FOR UPDATE` if `lock`: one statement per {@link READ_SLICE} keys,
 * in their order (a renewal of many keys held with many permits may read more rows than a
 * statement may have parameters).
 */
function* readRows(
  db: SqlDatabase,
  keys: readonly string[],
  lock: boolean,
): SqlScript<Map<string, RowState>> {
  const rows = new Map<string, RowState>();
  for (let start = 0; start < keys.length; start += READ_SLICE) {
    const { records } = yield rowsStep(db, keys.slice(start, start + READ_SLICE), lock);
    for (const [key, row] of rowStates(records)) rows.set(key, row);
  }
  return rows;
}

/** The first holder rows a key may have, of either mode (a release or a renewal does not say). */
function guessBoth(k: string): string[] {
  const guess = (mode: LockMode): string[] => holderRows(k, { mode, count: READERS_GUESS });
  return [...guess('shared'), ...guess('exclusive')];
}

/**
 * Reads (locked) the rows of the keys stored as `keys` (sorted) and the holder rows of those
 * held shared or counted, each key's row locked before its holder rows, as {@link readKeyRows}
 * does for one key. PostgreSQL, for the reason given there: the keys' rows, then exactly the
 * holder rows their markers name. Elsewhere: the keys' rows with the first holder rows each
 * may have, then those past the guess, if any.
 */
function* readHeldKeys(db: SqlDatabase, keys: readonly string[]): SqlScript<Map<string, RowState>> {
  const postgres = db.dialect.family === 'postgres';
  const rows = yield* readRows(
    db,
    postgres ? keys : keys.flatMap((k) => [k, ...guessBoth(k)]),
    true,
  );
  const holders = keys.flatMap((k) => heldRows(rows, k));
  if (!postgres) yield* readMissing(db, rows, holders);
  else for (const [key, row] of yield* readRows(db, holders, true)) rows.set(key, row);
  return rows;
}

/** The holder rows the marker of the key stored as `k` names, if `rows` has it held (else none). */
function heldRows(rows: ReadonlyMap<string, RowState>, k: string): string[] {
  const header = rows.get(k);
  const held = header?.live ? markerOf(header.owner) : undefined;
  return held ? holderRows(k, held) : [];
}

/**
 * Reads (locked) the key's row (with the writer mark, if in `head`) and the holder rows in
 * `holders`, the key's row locked first (as the mutex take locks it, right after the bucket).
 * One statement, except on PostgreSQL when holder rows may be inserted meanwhile (`fresh`: not
 * in a take, whose bucket lock keeps other takes, the only inserters, out): PostgreSQL reads a
 * statement's rows as of its start and re-reads only those it waited for, so a holder row a take
 * inserted while this statement waited for the key's row would be missed. Every change to holder
 * rows also writes the key's row: once that is locked, the next statement sees every holder row.
 */
function* readKeyRows(
  db: SqlDatabase,
  head: readonly string[],
  holders: readonly string[],
  fresh: boolean,
): SqlScript<Map<string, RowState>> {
  if (db.dialect.family !== 'postgres' || !fresh) {
    return yield* readRows(db, [...head, ...holders], true);
  }
  const rows = yield* readRows(db, head, true);
  if (!rows.has(head[0])) return rows;
  for (const [key, row] of yield* readRows(db, holders, true)) rows.set(key, row);
  return rows;
}

/** Reads (locked) into `rows` those of `keys` not read yet (the guess fell short). */
function* readMissing(
  db: SqlDatabase,
  rows: Map<string, RowState>,
  keys: readonly string[],
): SqlScript<void> {
  const guessed = new Set(rows.keys());
  // Rows absent from the table are not in `rows` either: only keys past the guess are read.
  const missing = keys.filter((key) => !guessed.has(key) && holderIndex(key) >= READERS_GUESS);
  for (const [key, row] of yield* readRows(db, missing, true)) rows.set(key, row);
}

/** {@link readRows} outside a script (a plain read on a pooled connection). */
async function readNow(db: SqlDatabase, keys: readonly string[]): Promise<Map<string, RowState>> {
  if (keys.length === 0) return new Map();
  const { sql, params } = rowsStep(db, keys, false);
  return rowStates((await db.exec(sql, [...params])).records);
}

function rowsStep(db: SqlDatabase, keys: readonly string[], lock: boolean): SqlStep {
  const { table, dialect } = db;
  const forUpdate = lock && dialect.family !== 'sqlite' ? ' FOR UPDATE' : '';
  // MariaDB may scan a small table instead of looking the keys up, and a locking read waits for
  // (and locks) every row it scans: the fence buckets too, a deadlock with the grants.
  const byKey = dialect.family === 'mysql' ? ' FORCE INDEX (PRIMARY)' : '';
  // PostgreSQL locks rows in the order it returns them, after sorting: the first key first (the
  // key's row, locked first by every transaction on the key, so their lock orders agree).
  const first = forUpdate && dialect.family === 'postgres' && keys.length > 1;
  const order = first ? ' ORDER BY CASE WHEN lock_key = ? THEN 0 ELSE 1 END, lock_key' : '';
  return {
    sql:
      `SELECT lock_key, owner, fence, expires_at, CASE WHEN ${dialect.heldLease} THEN 1 ELSE 0 END AS live, ` +
      `expires_at - ${dialect.nowMs} AS remaining FROM ${table}${byKey} WHERE lock_key IN (${marks(keys)})${order}${forUpdate}`,
    params: first ? [...keys, keys[0]] : keys,
  };
}

function rowStates(records: ReadonlyArray<Record<string, unknown>>): Map<string, RowState> {
  const rows = new Map<string, RowState>();
  for (const record of records) {
    const key = String(record.lock_key).trim();
    rows.set(key, {
      key,
      owner: record.owner === null || record.owner === undefined ? null : String(record.owner),
      live: Number(record.live) === 1,
      remaining: Math.max(0, Number(record.remaining ?? 0)),
      expiresAt: Number(record.expires_at ?? 0),
      fence: Number(record.fence),
    });
  }
  return rows;
}

/**
 * Writes held rows (key, `key_text`, owner), each inserted or an existing one taken over, with
 * the lease `ttlMs` and `fence`. A lease only grows: the key's row of a held key keeps the
 * longest lease among its holders, and a stale row's lease has run out anyway.
 */
function upsertStep(
  db: SqlDatabase,
  ttlMs: number,
  fence: number,
  rows: ReadonlyArray<readonly [string, string, string]>,
): SqlStep {
  const { table, dialect } = db;
  const values = rows.map(() => `(?, ?, ?, ${dialect.nowMs} + ?, ?)`).join(', ');
  const alias = dialect.family === 'postgres' ? ' AS cur' : '';
  const insert = `INSERT INTO ${table}${alias} (lock_key, key_text, owner, expires_at, fence) VALUES ${values}`;
  const mysql = dialect.family === 'mysql';
  const next = (column: string): string => (mysql ? `VALUES(${column})` : `excluded.${column}`);
  const current = alias ? 'cur.expires_at' : 'expires_at';
  const lease = dialect.greatest(`COALESCE(${current}, 0)`, next('expires_at'));
  const set = `key_text = ${next('key_text')}, owner = ${next('owner')}, expires_at = ${lease}, fence = ${next('fence')}`;
  const sql = mysql
    ? `${insert} ON DUPLICATE KEY UPDATE ${set}`
    : `${insert} ON CONFLICT (lock_key) DO UPDATE SET ${set}`;
  return { sql, params: rows.flatMap((row) => [...row, ttlMs, fence]) };
}

function deleteStep(db: SqlDatabase, keys: readonly string[]): SqlStep {
  return { sql: `DELETE FROM ${db.table} WHERE lock_key IN (${marks(keys)})`, params: keys };
}

/** `?, ?, …` for a list of parameters. */
function marks(values: readonly unknown[]): string {
  return values.map(() => '?').join(', ');
}
