/**
 * Runs one cell of the chaos matrix (one fault against one backend): starts the fenced resource
 * and three worker processes (the victim, wired as the fault needs, and two plain ones), lets
 * the victim take the lock, lets the others contend, strikes, waits for the lock to be granted
 * again, stops everything, and judges the merged history. Every process, proxy, namespace and
 * file it made is gone when it returns, whatever happened.
 */
import type { LockModuleOptions } from '../../lib';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkHistory, readHistory, type HistoryEvent } from '../support/history';
import { startTcpProxy, type TcpProxy } from '../../servers/tcp-proxy';
import type { ChaosBackend, ChaosTiming, Endpoint, Route } from './backends';
import type { ChaosWorkerArgs } from './chaos-worker';
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
import type { Fault, FaultContext } from './faults';
import { startFencedResource, type FencedWrite } from './fenced-resource';
import { createNetns, type Netns } from './netns';

const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const KEY = 'chaos';
const WORKERS = 3;

/** The outcome of one cell. */
export interface CellResult {
  readonly backend: string;
  readonly fault: string;
  /** Known-unsafe combination (the checker must catch it). */
  readonly expectUnsafe: boolean;
  /**
   * Overlaps inside a connection-bound lock's loss window (see `Fault.lossWindowMs`): counted
   * in `overlaps` too, and not a failure as long as each is that short and no stale fenced
   * write was accepted. The longest, in ms.
   */
  readonly windowOverlapMs?: number;
  /** `pass`; `caught` (known unsafe, violation found); `FAIL` otherwise. */
  readonly verdict: 'pass' | 'caught' | 'FAIL';
  /** Why a cell failed, or what the checker found in a known-unsafe one. */
  readonly findings: readonly string[];
  readonly overlaps: number;
  readonly fenceViolations: number;
  readonly lostUpdates: number;
  /** Fenced writes the resource refused (late writes of a holder that lost its lock). */
  readonly staleRejected: number;
  /** Accepted writes whose fence was below one accepted before: must be 0. */
  readonly staleAccepted: number;
  /** From the fault's start to the next grant, ms; `null` if none came. */
  readonly recoveryMs: number | null;
  readonly boundMs: number;
  /** Completed critical sections (witness writes). */
  readonly sections: number;
  readonly ttl: number;
  readonly durationMs: number;
}

const ms = (ns: bigint) => Number(ns / 1_000_000n);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Accepted writes whose fence was below a fence accepted earlier (re-derived, not trusted). */
function staleAccepted(writes: readonly FencedWrite[]): number {
  let max = -1;
  let stale = 0;
  for (const w of writes) {
    if (!w.accepted) continue;
    if (w.fence < max) stale++;
    max = Math.max(max, w.fence);
  }
  return stale;
}

/** The mutex rows' worker: a `@Locked` method (see chaos-worker.ts). */
export const LOCK_WORKER = 'test/chaos/chaos-worker.ts';

/**
 * Runs `fault` against `backend` (already started), with `workerScript` as every worker (it
 * takes `ChaosWorkerArgs` and writes the history `checkHistory` reads). Never throws for what
 * it finds; throws for a broken harness.
 */
export async function runCell(
  backend: ChaosBackend,
  fault: Fault,
  timing: ChaosTiming,
  workerScript: string = LOCK_WORKER,
): Promise<CellResult> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'ndl-chaos-'));
  const ttl = fault.ttl ? fault.ttl(backend, timing) : backend.ttl(timing);
  const expectUnsafe = fault.expectUnsafe?.(backend) ?? false;
  const witnessFile = join(dir, 'witness');
  writeFileSync(witnessFile, '0');
  const stopFile = join(dir, 'stop');
  const resource = await startFencedResource(join(dir, 'resource.sock'));
  const proxies: TcpProxy[] = [];
  const workers: Worker[] = [];
  let netns: Netns | undefined;
  try {
    // Wire the victim.
    let route: Route = (ep) => ep;
    let prefix: readonly string[] = [];
    const env: NodeJS.ProcessEnv = {};
    let clockFile: string | undefined;
    if (fault.victimSetup === 'proxied' || fault.victimSetup === 'netns') {
      if (fault.victimSetup === 'netns') {
        netns = createNetns();
        prefix = netns.exec;
      }
      const listenHost = netns?.hostAddress ?? '127.0.0.1';
      const byEndpoint = new Map<string, Endpoint>();
      for (const ep of backend.endpoints()) {
        const proxy = await startTcpProxy(ep.port, ep.host, listenHost);
        proxies.push(proxy);
        byEndpoint.set(`${ep.host}:${ep.port}`, { host: listenHost, port: proxy.port });
      }
      route = (ep) => byEndpoint.get(`${ep.host}:${ep.port}`)!;
    } else if (fault.victimSetup === 'faketime') {
      clockFile = join(dir, 'clock');
      writeFileSync(clockFile, '+0s');
      Object.assign(env, {
        LD_PRELOAD: FAKETIME_LIB,
        FAKETIME_TIMESTAMP_FILE: clockFile,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      });
    }

    const rowOptions = fault.options ?? ((options: LockModuleOptions) => options);
    const common = {
      key: KEY,
      ttl,
      waitTimeout: 5_000,
      holdMs: 40,
      maxSections: 2_000,
      witnessFile,
      resourceSocket: resource.socketPath,
      stopFile,
    };
    for (let i = 0; i < WORKERS; i++) {
      const victim = i === 0;
      workers.push(
        startWorker<ChaosWorkerArgs>(
          workerScript,
          {
            ...common,
            worker: `w${i}`,
            options: rowOptions(backend.options(victim ? route : (ep) => ep, timing)),
            strikeHoldMs: victim ? timing.strikeHoldMs : undefined,
            historyFile: join(dir, `w${i}.jsonl`),
            goFile: join(dir, victim ? 'go-victim' : 'go-others'),
          },
          victim ? prefix : [],
          victim ? env : {},
        ),
      );
    }
    const [victim] = workers;
    for (const w of workers)
      await waitFor(`${w.name} ready`, () => w.lines.includes('ready'), 30_000, w);

    const ctx: FaultContext = {
      backend,
      timing,
      victim: victim.child,
      victimExited: victim.exited,
      killVictim: () => killWorker(victim),
      proxies,
      netns,
      clockFile,
      key: KEY,
    };
    await fault.prepare?.(ctx);
    await victimFirst(victim, join(dir, 'go-victim'), join(dir, 'go-others'));
    const faultAt = await fault.inject(ctx);

    // Wait for the next grant after the fault, then let the workers go on a little.
    const boundMs = fault.boundMs(backend, timing);
    const files = workers.map((w) => join(dir, `${w.name}.jsonl`));
    const grantAfter = (events: HistoryEvent[]) =>
      events.filter((e) => e.ev === 'acq' && e.t > faultAt).sort((a, b) => (a.t < b.t ? -1 : 1))[0];
    const until = performance.now() + boundMs + 2_000;
    while (!grantAfter(readHistory(files)) && performance.now() < until) await sleep(50);
    await sleep(500);
    await stopWorkers(workers, stopFile);

    const events = readHistory(files);
    const victimKilled = fault.killsVictim === true;
    const victimExit = endOfWorker(victim);
    const check = checkHistory(events, {
      // A worker killed while holding holds nothing once it is dead.
      openHoldEnd: (h) =>
        h.worker === victim.name && victimKilled && victimExit !== undefined
          ? victimExit
          : 'infinity',
      witnessFinal: { [KEY]: Number(readFileSync(witnessFile, 'utf8')) },
    });
    const count = (...kinds: string[]) =>
      check.violations.filter((v) => kinds.includes(v.kind)).length;
    const next = grantAfter(events);
    const recoveryMs = next ? ms(next.t - faultAt) : null;
    const writes = resource.writes();
    const result = {
      overlaps: count('overlap'),
      fenceViolations: count('fence-duplicate', 'fence-order'),
      lostUpdates: count('lost-update'),
      staleRejected: writes.filter((w) => !w.accepted).length,
      staleAccepted: staleAccepted(writes),
      recoveryMs,
      boundMs,
      sections: check.criticalSections,
    };

    const problems: string[] = check.violations.slice(0, 3).map((v) => v.message);
    const harness: string[] = [];
    for (const w of workers) {
      const expectedDead = w === victim && victimKilled;
      if (!expectedDead && w.exitCode !== 0)
        harness.push(`${w.name} exit ${w.exitCode ?? 'none (killed)'}: ${stderrSummary(w.stderr)}`);
    }
    if (count('malformed') > 0)
      harness.push(
        `malformed history: ${check.violations.find((v) => v.kind === 'malformed')!.message}`,
      );
    // A connection-bound lock's loss window: overlaps that short (and the unfenced witness
    // updates they cost) are the notice the holder could not have had sooner.
    const windowMs = fault.lossWindowMs?.(backend, timing);
    const overlapMs = check.violations
      .filter((v) => v.kind === 'overlap')
      .map((v) => {
        const [earlier, later] = v.holds;
        return earlier.end === 'infinity' ? Infinity : Number(earlier.end - later.start) / 1e6;
      });
    const inWindow =
      windowMs !== undefined && overlapMs.length > 0 && overlapMs.every((d) => d <= windowMs);
    const safetyBroken = inWindow
      ? result.fenceViolations > 0
      : result.overlaps + result.fenceViolations + result.lostUpdates > 0;
    const liveness = recoveryMs !== null && recoveryMs <= boundMs;
    let verdict: CellResult['verdict'];
    const findings: string[] = [...harness];
    if (expectUnsafe) {
      verdict =
        safetyBroken && result.staleAccepted === 0 && harness.length === 0 ? 'caught' : 'FAIL';
      if (!safetyBroken)
        findings.push('known-unsafe configuration, but the checker found no violation');
      findings.push(...problems);
    } else {
      verdict =
        !safetyBroken && result.staleAccepted === 0 && liveness && harness.length === 0
          ? 'pass'
          : 'FAIL';
      findings.push(...problems);
      if (!liveness)
        findings.push(`no grant within ${boundMs} ms of the fault (${recoveryMs ?? 'none'} ms)`);
    }
    if (result.staleAccepted > 0)
      findings.push(`${result.staleAccepted} stale fenced write(s) accepted`);
    if (inWindow)
      findings.push(
        `${overlapMs.length} overlap(s) of at most ${Math.max(...overlapMs).toFixed(1)} ms inside the ${windowMs} ms loss window`,
      );
    return {
      backend: backend.id,
      fault: fault.id,
      expectUnsafe,
      ...(inWindow ? { windowOverlapMs: Math.max(...overlapMs) } : {}),
      verdict,
      findings,
      ttl,
      durationMs: Math.round(performance.now() - started),
      ...result,
    };
  } finally {
    await killAll(workers);
    await Promise.all(proxies.map((p) => p.close()));
    netns?.destroy();
    await resource.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
