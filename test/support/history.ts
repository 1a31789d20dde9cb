/**
 * Multi-process mutual-exclusion history: workers record what they believed (grant, release,
 * loss, witness read/write) as JSON lines; after the run the parent merges the files and checks
 * that no two holds of one key overlapped, that fences only went up, and that the witness
 * counter saw no lost update.
 *
 * Timestamps are `process.hrtime.bigint()` (CLOCK_MONOTONIC, system-wide on Linux), so they
 * compare across processes on one machine. On disk they are decimal strings (JSON has no
 * bigint); in memory they are `bigint` so no precision is lost.
 *
 * Line format (one JSON object per line, `t` a decimal string of nanoseconds):
 *   {"worker":"w1","key":"k","token":"…","fence":7,"ev":"acq","t":"123"}        right after the grant
 *   {"worker":"w1","key":"k","token":"…","ev":"rel","t":"456"}                 before release is sent
 *   {"worker":"w1","key":"k","token":"…","ev":"lost","reason":"…","t":"400"}   signal fired (LockLostError)
 *   {"worker":"w1","key":"k","token":"…","ev":"witness","read":3,"wrote":4,"t":"420"}  after the write
 *
 * Pure logic on node built-ins only, so worker processes can import it without Jest.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

/** Fields shared by every event: who, which lock, which acquisition, when. */
interface EventBase {
  /** Worker id, unique per process (include the pid if workers are restarted). */
  readonly worker: string;
  readonly key: string;
  /** Owner token of the acquisition; (worker, key, token) identifies one hold. */
  readonly token: string;
  /** Monotonic nanoseconds (`process.hrtime.bigint()`). */
  readonly t: bigint;
  /** `file:line` the event was read from, for messages; absent on hand-built events. */
  readonly at?: string;
}

/** Written right after the grant, so `t` is an upper bound of the grant time. */
export interface AcqEvent extends EventBase {
  readonly ev: 'acq';
  /** Fence of this key's grant; `null` on a backend without fencing. */
  readonly fence: number | null;
}

/** Written before the release is sent, so `t` is a lower bound of the release time. */
export interface RelEvent extends EventBase {
  readonly ev: 'rel';
}

/** Written when the lock's `AbortSignal` fires with a `LockLostError`. */
export interface LostEvent extends EventBase {
  readonly ev: 'lost';
  readonly reason?: string;
}

/**
 * One completed critical section on the witness counter: the worker read `read`, slept, then
 * wrote `wrote` (= read + 1). Written after the write, while still (believing it is) holding.
 */
export interface WitnessEvent extends EventBase {
  readonly ev: 'witness';
  readonly read: number;
  readonly wrote: number;
}

export type HistoryEvent = AcqEvent | RelEvent | LostEvent | WitnessEvent;
export type HistoryEventKind = HistoryEvent['ev'];

/**
 * One hold interval `[start, end]` of one (worker, key, token).
 * `end` is `min(rel.t, lost.t)`, or for a hold that never ended (crashed worker) whatever
 * {@link CheckOptions.openHoldEnd} says.
 */
export interface Hold {
  readonly worker: string;
  readonly key: string;
  readonly token: string;
  readonly fence: number | null;
  readonly start: bigint;
  readonly end: bigint | 'infinity';
  readonly endedBy: 'rel' | 'lost' | 'open';
}

/** A hold before its end is known; what {@link CheckOptions.openHoldEnd} receives. */
export type OpenHold = Omit<Hold, 'end' | 'endedBy'>;

export type ViolationKind =
  'overlap' | 'fence-duplicate' | 'fence-order' | 'lost-update' | 'malformed';

export interface Violation {
  readonly kind: ViolationKind;
  readonly key: string;
  /** Human-readable, with workers, tokens, fences and times, for the test failure output. */
  readonly message: string;
  /** Holds involved (for `overlap`: the earlier hold first). */
  readonly holds: readonly Hold[];
  /** Raw events involved (witness events for `lost-update`, the bad event for `malformed`). */
  readonly events: readonly HistoryEvent[];
}

/**
 * End assumed for holds with neither `rel` nor `lost` (the worker died holding the lock):
 * - `'infinity'` (default): the hold never ends, so any later grant of the key is an overlap.
 *   Right when nothing expires the lock (no ttl) and for runs without crashes.
 * - a `bigint`: one time for all open holds, e.g. the end of the run.
 * - a function: per hold, e.g. `exitT(worker) + ttlNs`, where `exitT` is the parent's
 *   `process.hrtime.bigint()` taken in the child's `'exit'` handler. The dead worker cannot have
 *   renewed after it exited, so its lease ended by then; a later grant is legitimate, not a
 *   false positive. (Take the time on `'exit'`, not before sending the kill: the child may renew
 *   in between.)
 * An end before the hold's start is clamped to the start.
 */
export type OpenHoldEnd = 'infinity' | bigint | ((hold: OpenHold) => bigint | 'infinity');

export interface CheckOptions {
  openHoldEnd?: OpenHoldEnd;
  /**
   * Witness counter value per key, read by the parent after every worker exited. Keys absent
   * here are only checked for duplicate reads.
   */
  witnessFinal?: ReadonlyMap<string, number> | Readonly<Record<string, number>>;
  /** Counter value before the run (default 0), for every key of `witnessFinal`. */
  witnessInitial?: number;
}

export interface CheckResult {
  readonly violations: Violation[];
  /** Number of holds (distinct acquisitions) checked. */
  readonly holds: number;
  /** Number of distinct keys with at least one hold. */
  readonly keys: number;
  /** Holds with neither `rel` nor `lost`. */
  readonly openHolds: number;
  /** Completed critical sections: number of `witness` events. */
  readonly criticalSections: number;
  /** Every hold, per key sorted by start: for debugging a failure. */
  readonly intervals: readonly Hold[];
}

// ---------------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------------

export interface HistoryRecorderOptions {
  /** Clock; default `process.hrtime.bigint`. Injectable for tests. */
  now?: () => bigint;
}

/**
 * Appends events of one worker to one file. The file is opened once in append mode and every
 * line goes out in a single synchronous write, so a line is in the page cache (and survives
 * SIGKILL of the worker) before the caller proceeds; only the line being written at the kill
 * can be cut short, which {@link readHistory} tolerates. No fsync: the machine does not crash
 * in these tests, only processes do. Use one file per process: a restarted process appending
 * after a truncated line would glue two lines together.
 */
export class HistoryRecorder {
  private fd: number | null;
  private readonly now: () => bigint;

  constructor(
    readonly file: string,
    readonly worker: string,
    options: HistoryRecorderOptions = {},
  ) {
    this.now = options.now ?? (() => process.hrtime.bigint());
    this.fd = openSync(file, 'a');
  }

  /** Record a grant; call right after `acquire` resolves. Returns the recorded time. */
  acq(key: string, token: string, fence: number | null): bigint {
    const t = this.now();
    this.write({ worker: this.worker, key, token, fence, ev: 'acq', t: t.toString() });
    return t;
  }

  /** Record a release; call before `release()` so the interval covers the whole hold. */
  rel(key: string, token: string): bigint {
    const t = this.now();
    this.write({ worker: this.worker, key, token, ev: 'rel', t: t.toString() });
    return t;
  }

  /**
   * Record a loss; call from the `AbortSignal` listener when the reason is a `LockLostError`.
   * `at` backdates it: a worker that finds its lock gone (say after being paused) ends its hold at
   * its last observation that the lock was held, not at the moment it found out.
   */
  lost(key: string, token: string, reason?: string, at?: bigint): bigint {
    const t = at ?? this.now();
    const base = { worker: this.worker, key, token, ev: 'lost' as const };
    this.write(reason === undefined ? { ...base, t: `${t}` } : { ...base, reason, t: `${t}` });
    return t;
  }

  /** Record a completed witness read-sleep-write inside the critical section. */
  witness(key: string, token: string, read: number, wrote: number): bigint {
    const t = this.now();
    this.write({ worker: this.worker, key, token, ev: 'witness', read, wrote, t: t.toString() });
    return t;
  }

  /** Close the file; idempotent. Recording after close throws. */
  close(): void {
    if (this.fd !== null) {
      closeSync(this.fd);
      this.fd = null;
    }
  }

  private write(line: HistoryLine): void {
    if (this.fd === null) throw new Error(`HistoryRecorder(${this.file}) is closed`);
    const buf = Buffer.from(JSON.stringify(line) + '\n', 'utf8');
    let off = 0;
    // writeSync may write less than asked; keep going so a line is never left half-written.
    while (off < buf.length) off += writeSync(this.fd, buf, off, buf.length - off);
  }
}

type OnDisk<E> = E extends HistoryEvent ? Omit<E, 't' | 'at'> & { readonly t: string } : never;

/** On-disk shape of a line: the event with `t` as a decimal string and no `at`. */
export type HistoryLine = OnDisk<HistoryEvent>;

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/** A line that is not a valid event and is not the unterminated last line of its file. */
export class HistoryParseError extends Error {
  constructor(
    readonly at: string,
    detail: string,
  ) {
    super(`${at}: ${detail}`);
    this.name = 'HistoryParseError';
  }
}

export interface ParsedHistory {
  readonly events: HistoryEvent[];
  /** Whether an unterminated, unparseable last line (a write cut by a kill) was dropped. */
  readonly truncated: boolean;
}

/**
 * Parse one file's text. Complete lines must all be valid events (a corrupt line in the middle
 * means the harness is broken, and skipping it could hide a violation), so they throw
 * {@link HistoryParseError}. The last line without a newline is the one a killed process was
 * writing: dropped if unparseable, kept if it happens to be complete. Blank lines are skipped.
 */
export function parseHistory(text: string, source = '<history>'): ParsedHistory {
  const lines = text.split('\n');
  const last = lines.pop() ?? '';
  const events: HistoryEvent[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const at = `${source}:${i + 1}`;
    events.push(toEvent(parseJson(line, at), at));
  });
  let truncated = false;
  if (last.trim() !== '') {
    const at = `${source}:${lines.length + 1}`;
    try {
      events.push(toEvent(JSON.parse(last), at));
    } catch {
      truncated = true;
    }
  }
  return { events, truncated };
}

/** Read and merge the files of all workers; events sorted by `t` (stable) for readability. */
export function readHistory(files: readonly string[]): HistoryEvent[] {
  const events = files.flatMap((file) => parseHistory(readFileSync(file, 'utf8'), file).events);
  return events.sort((a, b) => cmp(a.t, b.t));
}

function parseJson(line: string, at: string): unknown {
  try {
    return JSON.parse(line);
  } catch (err) {
    throw new HistoryParseError(at, `not JSON (${(err as Error).message}): ${line.slice(0, 200)}`);
  }
}

/** Validate one decoded line; strict (unknown `ev` throws) so a typo in a worker is caught. */
function toEvent(value: unknown, at: string): HistoryEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HistoryParseError(at, 'not a JSON object');
  }
  const o = value as Record<string, unknown>;
  const str = (name: string): string => {
    const v = o[name];
    if (typeof v !== 'string') throw new HistoryParseError(at, `"${name}" must be a string`);
    return v;
  };
  const int = (name: string): number => {
    const v = o[name];
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      throw new HistoryParseError(at, `"${name}" must be an integer`);
    }
    return v;
  };
  const rawT = str('t');
  if (!/^\d+$/.test(rawT)) throw new HistoryParseError(at, `"t" must be a decimal string`);
  const base = { worker: str('worker'), key: str('key'), token: str('token'), t: BigInt(rawT), at };
  switch (o.ev) {
    case 'acq': {
      const fence = o.fence;
      if (fence !== null && (typeof fence !== 'number' || !Number.isFinite(fence))) {
        throw new HistoryParseError(at, `"fence" must be a number or null`);
      }
      return { ...base, ev: 'acq', fence };
    }
    case 'rel':
      return { ...base, ev: 'rel' };
    case 'lost':
      return typeof o.reason === 'string'
        ? { ...base, ev: 'lost', reason: o.reason }
        : { ...base, ev: 'lost' };
    case 'witness':
      return { ...base, ev: 'witness', read: int('read'), wrote: int('wrote') };
    default:
      throw new HistoryParseError(at, `unknown "ev": ${JSON.stringify(o.ev)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Checking
// ---------------------------------------------------------------------------------------------

type End = bigint | 'infinity';

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function cmpEnd(a: End, b: End): number {
  if (a === 'infinity') return b === 'infinity' ? 0 : 1;
  if (b === 'infinity') return -1;
  return cmp(a, b);
}

function holdId(worker: string, key: string, token: string): string {
  return JSON.stringify([worker, key, token]);
}

function describeHold(h: Hold): string {
  return `${h.worker}/${h.token} (fence ${h.fence}) [${h.start}, ${h.end}${h.endedBy === 'open' ? ' open' : ''}]`;
}

function describeEvent(e: HistoryEvent): string {
  return `${e.ev} by ${e.worker}/${e.token} at t=${e.t}${e.at ? ` (${e.at})` : ''}`;
}

interface HoldDraft {
  readonly acq: AcqEvent;
  rel?: bigint;
  lost?: bigint;
}

/**
 * Check a merged history. Order of `events` does not matter.
 *
 * - overlap: per key, holds sorted by start and swept; a start strictly before the largest end
 *   seen so far overlaps that hold. A start EQUAL to a previous end is allowed: `rel` is taken
 *   before the release is sent and `acq` after the next grant, so a correct lock gives
 *   `rel.t < acq.t`; equality can only be two events in the same nanosecond, not a proof of
 *   overlap. Note a `lost` ends the hold at the moment the worker learned of the loss: if
 *   another grant came before that, it is reported (the lock let two workers believe they held).
 * - fence-duplicate / fence-order: per key, non-null fences in grant order (acq.t) must be
 *   unique and strictly increasing. A repeated value is reported only as a duplicate.
 * - lost-update: two witness events of a key that read the same value, or a final counter
 *   below `initial + witnesses`. A final counter above that is also reported, unless the key has
 *   open holds: a worker killed between its write and its `witness` line leaves one unrecorded
 *   increment, so up to one extra per open hold is allowed.
 * - malformed: events that do not form holds (rel/lost/witness without acq, acq twice, end before
 *   start, witness with wrote != read + 1). They point at a harness bug.
 */
export function checkHistory(
  events: readonly HistoryEvent[],
  options: CheckOptions = {},
): CheckResult {
  const violations: Violation[] = [];
  const malformed = (e: HistoryEvent, detail: string, holds: Hold[] = []): void => {
    violations.push({
      kind: 'malformed',
      key: e.key,
      message: `malformed on key "${e.key}": ${detail}: ${describeEvent(e)}`,
      holds,
      events: [e],
    });
  };

  // 1. Build holds from acq, then close them with rel/lost (two passes: order-independent).
  const drafts = new Map<string, HoldDraft>();
  for (const e of events) {
    if (e.ev !== 'acq') continue;
    const id = holdId(e.worker, e.key, e.token);
    if (drafts.has(id)) malformed(e, 'second acq for the same worker, key and token');
    else drafts.set(id, { acq: e });
  }
  for (const e of events) {
    if (e.ev !== 'rel' && e.ev !== 'lost') continue;
    const draft = drafts.get(holdId(e.worker, e.key, e.token));
    if (!draft) {
      malformed(e, `${e.ev} without acq`);
      continue;
    }
    if (e.t < draft.acq.t) {
      malformed(e, `${e.ev} before its acq at t=${draft.acq.t}`);
      continue;
    }
    const prev = draft[e.ev];
    if (prev !== undefined) malformed(e, `second ${e.ev} for the same hold`);
    draft[e.ev] = prev === undefined || e.t < prev ? e.t : prev;
  }

  const byKey = new Map<string, Hold[]>();
  const byId = new Map<string, Hold>();
  let openHolds = 0;
  for (const [id, { acq, rel, lost }] of drafts) {
    const open: OpenHold = {
      worker: acq.worker,
      key: acq.key,
      token: acq.token,
      fence: acq.fence,
      start: acq.t,
    };
    let end: End;
    let endedBy: Hold['endedBy'];
    if (rel !== undefined && (lost === undefined || rel <= lost)) [end, endedBy] = [rel, 'rel'];
    else if (lost !== undefined) [end, endedBy] = [lost, 'lost'];
    else {
      openHolds++;
      endedBy = 'open';
      const spec = options.openHoldEnd ?? 'infinity';
      end = typeof spec === 'function' ? spec(open) : spec;
      if (end !== 'infinity' && end < open.start) end = open.start;
    }
    const hold: Hold = { ...open, end, endedBy };
    byId.set(id, hold);
    const list = byKey.get(hold.key);
    if (list) list.push(hold);
    else byKey.set(hold.key, [hold]);
  }

  // 2. Overlap sweep and fence checks, per key.
  const intervals: Hold[] = [];
  for (const [key, holds] of byKey) {
    holds.sort((a, b) => cmp(a.start, b.start) || cmpEnd(a.end, b.end));
    intervals.push(...holds);

    let maxHold: Hold | null = null;
    for (const h of holds) {
      if (maxHold && cmpEnd(h.start, maxHold.end) < 0) {
        const by = maxHold.end === 'infinity' ? 'an open hold' : `${maxHold.end - h.start} ns`;
        violations.push({
          kind: 'overlap',
          key,
          message: `overlap on key "${key}" (${by}): ${describeHold(h)} starts before ${describeHold(maxHold)} ends`,
          holds: [maxHold, h],
          events: [],
        });
      }
      if (!maxHold || cmpEnd(h.end, maxHold.end) > 0) maxHold = h;
    }

    const fenced = holds.filter((h) => h.fence !== null);
    const byFence = new Map<number, Hold[]>();
    for (const h of fenced) {
      const f = h.fence as number;
      const same = byFence.get(f);
      if (same) same.push(h);
      else byFence.set(f, [h]);
    }
    for (const [fence, same] of byFence) {
      if (same.length < 2) continue;
      violations.push({
        kind: 'fence-duplicate',
        key,
        message: `fence ${fence} granted ${same.length} times on key "${key}": ${same.map(describeHold).join('; ')}`,
        holds: same,
        events: [],
      });
    }
    let maxFenced: Hold | null = null;
    for (const h of fenced) {
      if (maxFenced && (h.fence as number) < (maxFenced.fence as number)) {
        violations.push({
          kind: 'fence-order',
          key,
          message: `fence went down on key "${key}": ${describeHold(h)} granted after ${describeHold(maxFenced)}`,
          holds: [maxFenced, h],
          events: [],
        });
      }
      if (!maxFenced || (h.fence as number) > (maxFenced.fence as number)) maxFenced = h;
    }
  }

  // 3. Witness: every completed critical section must have incremented the counter once.
  const witnesses = new Map<string, WitnessEvent[]>();
  for (const e of events) {
    if (e.ev !== 'witness') continue;
    const hold = byId.get(holdId(e.worker, e.key, e.token));
    if (!hold) malformed(e, 'witness without acq');
    if (e.wrote !== e.read + 1) {
      malformed(e, `witness wrote ${e.wrote} after reading ${e.read}`, hold ? [hold] : []);
    }
    const list = witnesses.get(e.key);
    if (list) list.push(e);
    else witnesses.set(e.key, [e]);
  }
  let criticalSections = 0;
  for (const [key, list] of witnesses) {
    criticalSections += list.length;
    const byRead = new Map<number, WitnessEvent[]>();
    for (const w of list) {
      const same = byRead.get(w.read);
      if (same) same.push(w);
      else byRead.set(w.read, [w]);
    }
    for (const [read, same] of byRead) {
      if (same.length < 2) continue;
      violations.push({
        kind: 'lost-update',
        key,
        message: `lost update on key "${key}": ${same.length} critical sections read ${read}: ${same.map(describeEvent).join('; ')}`,
        holds: same.flatMap((w) => byId.get(holdId(w.worker, w.key, w.token)) ?? []),
        events: same,
      });
    }
  }
  const finals: [string, number][] =
    options.witnessFinal instanceof Map
      ? [...options.witnessFinal]
      : Object.entries(options.witnessFinal ?? {});
  const initial = options.witnessInitial ?? 0;
  for (const [key, final] of finals) {
    const list = witnesses.get(key) ?? [];
    const expected = initial + list.length;
    const slack = (byKey.get(key) ?? []).filter((h) => h.endedBy === 'open').length;
    if (final >= expected && final <= expected + slack) continue;
    const why =
      final < expected
        ? 'increments were overwritten'
        : `more increments than recorded critical sections (${slack} open hold(s) allowed for)`;
    violations.push({
      kind: 'lost-update',
      key,
      message: `lost update on key "${key}": witness ended at ${final}, expected ${expected} (${initial} + ${list.length} critical sections): ${why}`,
      holds: [],
      events: list,
    });
  }

  return {
    violations,
    holds: byId.size,
    keys: byKey.size,
    openHolds,
    criticalSections,
    intervals,
  };
}
