/**
 * The rows of the chaos matrix: what the nemesis does to the victim (the worker holding the
 * lock) or to the store, how the victim must be wired for it, and how soon the lock must be
 * available again afterwards on each backend.
 */
import { writeFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { redisLockNames } from '../support/redis-names';
import { redisCommand } from '../../servers/redis-servers';
import type { TcpProxy } from '../../servers/tcp-proxy';
import type { LockModuleOptions } from '../../lib';
import type { ChaosBackend, ChaosTiming } from './backends';
import { netnsUnavailable, type Netns } from './netns';

/** How the victim worker is started: as is, through TCP proxies, in a namespace, or under libfaketime. */
export type VictimSetup = 'plain' | 'proxied' | 'netns' | 'faketime';

/** What a fault can act on. */
export interface FaultContext {
  readonly backend: ChaosBackend;
  readonly timing: ChaosTiming;
  readonly victim: ChildProcess;
  /** Resolves with the runner's monotonic time once the victim process has exited. */
  readonly victimExited: Promise<bigint>;
  /** SIGKILLs the victim, recording when (its holds end then). */
  readonly killVictim: () => void;
  /** The victim's proxies, one per store endpoint, in `backend.endpoints()` order ('proxied', 'netns'). */
  readonly proxies: readonly TcpProxy[];
  readonly netns?: Netns;
  /** libfaketime's timestamp file for the victim ('faketime'). */
  readonly clockFile?: string;
  /** The lock key the workers contend for. */
  readonly key: string;
}

/** One row of the matrix. */
export interface Fault {
  readonly id: string;
  readonly label: string;
  /** `true`, or why the fault does not apply to that backend. */
  applies(backend: ChaosBackend): true | string;
  readonly victimSetup: VictimSetup;
  /** The fault kills the victim: a hold it had open ends when it was killed. */
  readonly killsVictim?: boolean;
  /** Known-unsafe combination: the checker must find the violation. */
  expectUnsafe?(backend: ChaosBackend): boolean;
  /**
   * A lock bound to a connection ends the moment the server ends the session; the holder learns
   * when the news reaches it. Overlaps no longer than this (ms) are that window, not a bug, and
   * are reported as such; the fenced resource must still refuse every stale write.
   */
  lossWindowMs?(backend: ChaosBackend, timing: ChaosTiming): number | undefined;
  /** Lock ttl for this row when it differs from the backend's. */
  ttl?(backend: ChaosBackend, timing: ChaosTiming): number;
  /** The workers' module options for this row, from the backend's (absent: as they are). */
  options?(options: LockModuleOptions): LockModuleOptions;
  /** Runs after every worker is ready, before the victim starts. */
  prepare?(ctx: FaultContext): Promise<void>;
  /** Strikes while the victim holds; resolves when the fault is over, with the time it began. */
  inject(ctx: FaultContext): Promise<bigint>;
  /** Longest time from the fault's start until another grant, ms. */
  boundMs(backend: ChaosBackend, timing: ChaosTiming): number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Longest overlap accepted as a connection-bound lock's loss window (see Fault.lossWindowMs). */
const LOSS_WINDOW_MS = 200;
const hr = () => process.hrtime.bigint();

/** Liveness after the victim went silent for `silentMs`: the store's own expiry, or the silence for locks bound to a live connection. */
const afterSilence = (b: ChaosBackend, t: ChaosTiming, silentMs: number): number =>
  (b.expiryMs(t) > 0 ? b.expiryMs(t) : silentMs + b.ttl(t)) + 1_000;

/** Liveness when the victim may keep its lock through the fault: its hold, plus an expiry if it loses it. */
const afterHold = (b: ChaosBackend, t: ChaosTiming): number =>
  t.strikeHoldMs + b.expiryMs(t) + 2_000;

/** Turns a fault on for `faultMs`, then off; resolves the time it began. */
async function forAWhile(ctx: FaultContext, on: () => void, off: () => void): Promise<bigint> {
  const start = hr();
  on();
  await sleep(ctx.timing.faultMs);
  off();
  return start;
}

/**
 * `true` when `fault` runs against `backend` in its profile, else why not: the fault does not
 * apply, or the column runs only some rows (`ChaosBackend.faults`).
 */
export function runsOn(fault: Fault, backend: ChaosBackend): true | string {
  if (backend.faults && !backend.faults.includes(fault.id)) return 'not in this profile';
  return fault.applies(backend);
}

const onlyRedisVolatile = (b: ChaosBackend): true | string =>
  b.id === 'redis-volatile' ? 'same as redis (AOF) but for the restart' : true;

/**
 * Waits until the victim has just renewed its lease on the Redis node at `port` (its PTTL jumps
 * up), so a fault that follows lands at the start of a renewal period: the window in which a
 * holder still believes it holds a lock that is gone is then as wide as it can be, and a
 * known-unsafe configuration is caught every time rather than by luck.
 */
async function afterRenewal(port: number, key: string, ttl: number): Promise<void> {
  const lockKey = redisLockNames('', key).lock;
  const until = performance.now() + ttl;
  let last = Number.POSITIVE_INFINITY;
  while (performance.now() < until) {
    const pttl = Number((await redisCommand(port, 'PTTL', lockKey)).slice(1));
    if (pttl > last + 50) return;
    last = pttl;
    await sleep(3);
  }
  throw new Error(`no renewal of ${lockKey} seen on port ${port} within ${ttl} ms`);
}

/** The workers' options with the restart guard of every backend turned off. */
function withoutRestartGuard(options: LockModuleOptions): LockModuleOptions {
  const backends = Object.fromEntries(
    Object.entries(options.backends).map(([name, config]) => [
      name,
      { ...config, restartGuard: false },
    ]),
  ) as LockModuleOptions['backends'];
  return { ...options, backends };
}

export const FAULTS: readonly Fault[] = [
  {
    id: 'holder-kill',
    label: 'holder `kill -9`',
    applies: onlyRedisVolatile,
    victimSetup: 'plain',
    killsVictim: true,
    inject: async (ctx) => {
      ctx.killVictim();
      return ctx.victimExited;
    },
    boundMs: (b, t) => afterSilence(b, t, 0),
  },
  {
    id: 'holder-pause',
    label: 'holder `SIGSTOP` > ttl, then `SIGCONT`',
    applies: onlyRedisVolatile,
    victimSetup: 'plain',
    inject: (ctx) =>
      forAWhile(
        ctx,
        () => ctx.victim.kill('SIGSTOP'),
        () => ctx.victim.kill('SIGCONT'),
      ),
    boundMs: (b, t) => afterSilence(b, t, t.faultMs),
  },
  {
    id: 'store-restart',
    label: 'store crash: server killed + restarted / connections killed',
    applies: (b) => (b.storeFault ? true : 'no server'),
    victimSetup: 'plain',
    // Connection-bound SQL locks (for-update, advisory): killing the connection frees the lock
    // on the server at once, and a waiter blocked in the database gets it at once.
    lossWindowMs: (b) => (b.connectionBound ? LOSS_WINDOW_MS : undefined),
    ttl: (b, t) => (b.id === 'redis-volatile' ? 3 * t.ttl : b.ttl(t)),
    inject: async (ctx) => {
      if (ctx.backend.id === 'redis-volatile') {
        await afterRenewal(ctx.backend.endpoints()[0].port, ctx.key, 3 * ctx.timing.ttl);
      }
      const start = hr();
      await ctx.backend.storeFault!.run();
      return start;
    },
    boundMs: afterHold,
  },
  {
    id: 'store-restart-unguarded',
    label: 'store crash without persistence, `restartGuard: false`',
    applies: (b) => (b.id === 'redis-volatile' ? true : 'Redis without persistence only'),
    victimSetup: 'plain',
    expectUnsafe: () => true,
    options: withoutRestartGuard,
    ttl: (_b, t) => 3 * t.ttl,
    inject: async (ctx) => {
      await afterRenewal(ctx.backend.endpoints()[0].port, ctx.key, 3 * ctx.timing.ttl);
      const start = hr();
      await ctx.backend.storeFault!.run();
      return start;
    },
    boundMs: afterHold,
  },
  {
    id: 'blackhole',
    label: 'holder’s connections black-holed (TCP proxy) > ttl',
    applies: (b) => (!b.networked ? 'no network' : onlyRedisVolatile(b)),
    victimSetup: 'proxied',
    inject: (ctx) =>
      forAWhile(
        ctx,
        () => ctx.proxies.forEach((p) => p.blackhole(true)),
        () => ctx.proxies.forEach((p) => p.blackhole(false)),
      ),
    boundMs: (b, t) => afterSilence(b, t, t.faultMs),
  },
  {
    id: 'clock-jump',
    label: 'holder’s clock +30 s, then −30 s (libfaketime)',
    applies: onlyRedisVolatile,
    victimSetup: 'faketime',
    inject: async (ctx) => {
      const start = hr();
      writeFileSync(ctx.clockFile!, '+30s');
      await sleep(ctx.timing.faultMs / 2);
      writeFileSync(ctx.clockFile!, '-30s');
      await sleep(ctx.timing.faultMs / 2);
      writeFileSync(ctx.clockFile!, '+0s');
      return start;
    },
    boundMs: afterHold,
  },
  {
    id: 'partition',
    label: 'holder partitioned (`ip netns`, link down) > ttl',
    applies: (b) => {
      if (!b.networked) return 'no network';
      const why = netnsUnavailable();
      return why ? `skipped: ${why}` : onlyRedisVolatile(b);
    },
    victimSetup: 'netns',
    inject: (ctx) =>
      forAWhile(
        ctx,
        () => ctx.netns!.partition(),
        () => ctx.netns!.heal(),
      ),
    // A lock bound to a connection is freed by the server once the connection has been silent
    // for its session timeout, whether the holder's packets flow again or not.
    boundMs: (b, t) => afterSilence(b, t, t.faultMs),
  },
  {
    id: 'redlock-bare-quorum',
    label: 'Redlock node restarted empty while the holder has a bare quorum',
    applies: (b) => (b.id === 'redlock' ? true : 'Redlock only'),
    victimSetup: 'proxied',
    ttl: (_b, t) => 3 * t.ttl,
    // The victim cannot reach node 3: its grants and renewals hold nodes 1 and 2 only.
    prepare: async (ctx) => ctx.proxies[2].blackhole(true),
    inject: async (ctx) => {
      const eps = ctx.backend.endpoints();
      await afterRenewal(eps[0].port, ctx.key, 3 * ctx.timing.ttl);
      const start = hr();
      await ctx.backend.storeFault!.run(); // node 2 of 3, restarted empty
      return start;
    },
    boundMs: afterHold,
  },
  {
    id: 'redlock-bare-quorum-unguarded',
    label: 'the same, `restartGuard: false`',
    applies: (b) => (b.id === 'redlock' ? true : 'Redlock only'),
    victimSetup: 'proxied',
    expectUnsafe: () => true,
    options: withoutRestartGuard,
    ttl: (_b, t) => 3 * t.ttl,
    // The victim cannot reach node 3: its grants and renewals hold nodes 1 and 2 only.
    prepare: async (ctx) => ctx.proxies[2].blackhole(true),
    inject: async (ctx) => {
      const eps = ctx.backend.endpoints();
      await afterRenewal(eps[0].port, ctx.key, 3 * ctx.timing.ttl);
      const start = hr();
      await ctx.backend.storeFault!.run(); // node 2 of 3, restarted empty
      return start;
    },
    boundMs: afterHold,
  },
];
