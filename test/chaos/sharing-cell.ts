/**
 * Runs one sharing row of the chaos matrix (see sharing-scenarios.ts) against one backend: the
 * victim takes the key with its request and holds it, the other workers then ask with theirs
 * (some get in beside it, the rest wait), the row's fault strikes the victim, and the runner
 * waits for the key to be given back (`scenario.recovered`). Then every worker stops and the
 * merged holds are judged by `checkAdmission`: never more holders than the key admits, no slot
 * twice, fences unique and rising. Every process and file it made is gone when it returns.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LockBackendCapabilities, LockMode } from '../../lib/core/contract/lock-backend';
import { checkAdmission, type AdmittedHold } from './admission-check';
import type { ChaosBackend, ChaosTiming } from './backends';
import type { CellResult } from './cell';
import {
  endOfWorker,
  killAll,
  killWorker,
  startWorker,
  stopWorkers,
  victimFirst,
  waitFor,
  type Worker,
  stderrSummary,
} from './chaos-process';
import { FAULTS, runsOn, type Fault, type FaultContext } from './faults';
import type { SharingScenario } from './sharing-scenarios';
import type { SharingHistoryLine, SharingWorkerArgs } from './sharing-worker';

const KEY = 'chaos-sharing';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const ms = (ns: bigint) => Number(ns / 1_000_000n);

/** The fault of the matrix that strikes in `scenario`. */
function faultOf(scenario: SharingScenario): Fault {
  const fault = FAULTS.find((f) => f.id === scenario.fault);
  if (!fault) throw new Error(`${scenario.id}: no fault ${scenario.fault}`);
  return fault;
}

/**
 * `true` when `scenario` runs on `backend`, else why not: its fault does not run there (see
 * `runsOn`), or the backend does not declare the capability (`capabilities`, read from the
 * backend itself; absent: not read yet, so only the fault is judged).
 */
export function sharingRunsOn(
  scenario: SharingScenario,
  backend: ChaosBackend,
  capabilities?: LockBackendCapabilities,
): true | string {
  const applies = runsOn(faultOf(scenario), backend);
  if (applies !== true) return applies;
  if (capabilities && capabilities[scenario.capability] !== true)
    return `the backend declares no capabilities.${scenario.capability}`;
  return true;
}

/** Every hold in `files`; one still open ends at `openEnd(worker)`. */
function readHolds(files: readonly string[], openEnd: (worker: string) => bigint): AdmittedHold[] {
  const started = new Map<string, Omit<AdmittedHold, 'end'>>();
  const holds: AdmittedHold[] = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    for (const text of readFileSync(file, 'utf8').split('\n')) {
      // A killed worker may leave half a line: only whole JSON lines are events.
      if (!text.endsWith('}')) continue;
      const line = JSON.parse(text) as SharingHistoryLine;
      if (line.ev === 'acq') {
        const { ev: _ev, t, ...rest } = line;
        started.set(line.token, { ...rest, start: BigInt(t) });
      } else {
        const hold = started.get(line.token);
        started.delete(line.token);
        if (hold) holds.push({ ...hold, end: BigInt(line.t) });
      }
    }
  }
  for (const hold of started.values()) holds.push({ ...hold, end: openEnd(hold.worker) });
  return holds;
}

/**
 * The first grant after `after` of mode `mode` that leaves `holders` live holders at once (the
 * key given back); `undefined` if none.
 */
export function recoveredAt(
  holds: readonly AdmittedHold[],
  after: bigint,
  recovered: { readonly mode: LockMode; readonly holders: number },
): bigint | undefined {
  const edges = holds.flatMap((h) => [
    { t: h.start, delta: 1, h },
    { t: h.end, delta: -1, h },
  ]);
  edges.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.delta - b.delta));
  let live = 0;
  for (const { t, delta, h } of edges) {
    live += delta;
    if (delta > 0 && t > after && h.mode === recovered.mode && live >= recovered.holders) return t;
  }
  return undefined;
}

/** Runs `scenario` against `backend` (already started). Throws only for a broken harness. */
export async function runSharingCell(
  backend: ChaosBackend,
  scenario: SharingScenario,
  timing: ChaosTiming,
): Promise<CellResult> {
  const started = performance.now();
  const fault = faultOf(scenario);
  const dir = mkdtempSync(join(tmpdir(), 'ndl-chaos-sharing-'));
  const ttl = backend.ttl(timing);
  const stopFile = join(dir, 'stop');
  const workers: Worker[] = [];
  try {
    const requests = [scenario.victim, ...scenario.others];
    for (const [i, request] of requests.entries()) {
      const victim = i === 0;
      workers.push(
        startWorker<SharingWorkerArgs>('test/chaos/sharing-worker.ts', {
          worker: `w${i}`,
          options: backend.options((ep) => ep, timing),
          key: KEY,
          request,
          ttl,
          waitTimeout: 5_000,
          holdMs: 40,
          ...(victim ? { strikeHoldMs: timing.strikeHoldMs } : {}),
          historyFile: join(dir, `w${i}.jsonl`),
          goFile: join(dir, victim ? 'go-victim' : 'go-others'),
          stopFile,
        }),
      );
    }
    const [victim] = workers;
    for (const w of workers)
      await waitFor(`${w.name} ready`, () => w.lines.includes('ready'), 30_000, w);
    await victimFirst(victim, join(dir, 'go-victim'), join(dir, 'go-others'));
    const ctx: FaultContext = {
      backend,
      timing,
      victim: victim.child,
      victimExited: victim.exited,
      killVictim: () => killWorker(victim),
      proxies: [],
      key: KEY,
    };
    const faultAt = await fault.inject(ctx);

    const boundMs = fault.boundMs(backend, timing);
    const files = workers.map((w) => join(dir, `${w.name}.jsonl`));
    // A hold still open: the victim's ended when it died; anyone else's is still going.
    const openEnd = (worker: string): bigint =>
      (worker === victim.name ? endOfWorker(victim) : undefined) ?? process.hrtime.bigint();
    const until = performance.now() + boundMs + 2_000;
    while (
      recoveredAt(readHolds(files, openEnd), faultAt, scenario.recovered) === undefined &&
      performance.now() < until
    ) {
      await sleep(50);
    }
    await sleep(500);
    await stopWorkers(workers, stopFile);

    const holds = readHolds(files, openEnd);
    const check = checkAdmission(holds);
    const at = recoveredAt(holds, faultAt, scenario.recovered);
    const recoveryMs = at === undefined ? null : ms(at - faultAt);
    const harness = workers
      .filter((w) => w !== victim && w.exitCode !== 0)
      .map((w) => `${w.name} exit ${w.exitCode ?? 'none (killed)'}: ${stderrSummary(w.stderr)}`);
    const overlaps = check.overAdmissions + check.slotViolations;
    const liveness = recoveryMs !== null && recoveryMs <= boundMs;
    const findings = [...harness, ...check.findings];
    if (!liveness) {
      findings.push(
        `not given back (${scenario.recovered.holders} × ${scenario.recovered.mode}) within ` +
          `${boundMs} ms of the fault (${recoveryMs ?? 'none'} ms)`,
      );
    }
    const safe = overlaps + check.fenceViolations === 0;
    return {
      backend: backend.id,
      fault: scenario.id,
      expectUnsafe: false,
      verdict: safe && liveness && harness.length === 0 ? 'pass' : 'FAIL',
      findings,
      overlaps,
      fenceViolations: check.fenceViolations,
      // Sharing rows have no witness counter and no fenced resource: the slots are the check.
      lostUpdates: 0,
      staleRejected: 0,
      staleAccepted: 0,
      recoveryMs,
      boundMs,
      sections: holds.length,
      ttl,
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    await killAll(workers);
    rmSync(dir, { recursive: true, force: true });
  }
}
