/**
 * Leadership across processes, on every store backend: three candidate processes run a
 * `@LeaderOnly` job every 20 ms, each run a write under its term sent to this test, which plays
 * the fenced resource (it keeps the highest term and refuses lower ones). Through a pause of the
 * leader longer than its lease (SIGSTOP, SIGCONT), a crash (SIGKILL) and a shutdown (SIGTERM):
 * - at no instant do two processes lead: ordered by time, the writes' terms never go down;
 * - terms strictly rise from one leader to the next;
 * - a leader paused past its lease writes nothing under its old term once it resumes (it knows
 *   it lost), and nothing is refused by the resource;
 * - a crashed leader is replaced within its lease (the session timeout on ZooKeeper) plus a
 *   second, a leader shutting down within a second.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { typeormTarget } from '../conformance/typeorm.targets';
import { sleep } from '../support/async';
import type { LeaderWorkerArgs, LeaderWorkerLine } from '../support/leader-worker';
import { redlockSetup, type StoreSetup, zookeeperStandaloneSetup } from '../support/store-setups';
import { spawnTsWorker } from '../support/ts-worker';

const TTL_MS = 1_500;
const TICK_MS = 20;

interface Target {
  name: string;
  setup: () => Promise<StoreSetup>;
  /** How long a crashed leader can keep the name: its lease, or the session timeout. */
  crashBoundMs: number;
  /** Whether a paused leader's name passes on while it is paused (lease or session expiry). */
  pausePassesOn: boolean;
}

const TARGETS: Target[] = [
  {
    name: 'redis',
    setup: async () => ({
      config: { type: 'redis', url: MACHINE_REDIS_URL, restartGuard: false },
    }),
    crashBoundMs: TTL_MS,
    pausePassesOn: true,
  },
  { name: 'redlock', setup: redlockSetup, crashBoundMs: TTL_MS, pausePassesOn: true },
  // Sessions of 4 s: a crashed or paused leader's node goes when the server expires it.
  { name: 'zookeeper', setup: zookeeperStandaloneSetup, crashBoundMs: 4_000, pausePassesOn: true },
  {
    name: 'typeorm table on postgres',
    setup: () => typeormTarget('postgres', 'table').setup('leader'),
    crashBoundMs: TTL_MS,
    pausePassesOn: true,
  },
  {
    name: 'typeorm table on sqlite',
    setup: () => typeormTarget('sqlite', 'table').setup('leader'),
    crashBoundMs: TTL_MS,
    pausePassesOn: true,
  },
  // Session strategies: a crash closes the connection, and the database frees the lock at once;
  // a paused leader's connection stays open, so its lock stays until it resumes and gives it up.
  {
    name: 'typeorm advisory on postgres',
    setup: () => typeormTarget('postgres', 'advisory').setup('leader'),
    crashBoundMs: 0,
    pausePassesOn: false,
  },
  {
    name: 'typeorm for-update on mariadb',
    setup: () => typeormTarget('mariadb', 'for-update').setup('leader'),
    crashBoundMs: 0,
    pausePassesOn: false,
  },
];

/** One candidate process. */
class Candidate {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  ready = false;
  private stderr = '';

  constructor(
    readonly id: string,
    args: LeaderWorkerArgs,
    onWrite: (line: LeaderWorkerLine) => void,
  ) {
    const child = spawnTsWorker('leader-worker.ts', args);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    let buffered = '';
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const text of lines) {
        const line = JSON.parse(text) as LeaderWorkerLine;
        if (line.ev === 'ready') this.ready = true;
        else onWrite(line);
      }
    });
    child.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  /** What it printed on stderr (for a failure's message). */
  errors(): string {
    return this.stderr;
  }
}

/** Polls `check` every 10 ms until true; how long it took; throws after `ms`. */
async function until(what: string, check: () => boolean, ms: number): Promise<number> {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(10);
  }
  return performance.now() - started;
}

describe.each(TARGETS)('leadership across processes: $name', (target) => {
  let store: StoreSetup;
  beforeAll(async () => {
    store = await target.setup();
  }, 60_000);
  afterAll(() => store?.teardown?.());

  it('one leader at a time, rising terms, a paused leader silent on resume, fail-over in bounds', async () => {
    const name = `jobs-${randomUUID()}`;
    const writes: LeaderWorkerLine[] = [];
    const refused: LeaderWorkerLine[] = [];
    let highest = -Infinity;
    const onWrite = (line: LeaderWorkerLine): void => {
      // The fenced resource: a write under a lower term than one it accepted is refused.
      if (line.term! < highest) refused.push(line);
      else highest = line.term!;
      writes.push(line);
    };
    const candidates = ['a', 'b', 'c'].map(
      (id) =>
        new Candidate(
          id,
          {
            options: {
              backends: { main: store.config as LockBackendConfig },
              keyPrefix: `lp-${name}:`,
              leaderId: id,
            },
            name,
            ttl: TTL_MS,
            tickMs: TICK_MS,
          },
          onWrite,
        ),
    );
    const byId = new Map(candidates.map((c) => [c.id, c]));
    const leaderNow = (): Candidate => byId.get(writes.at(-1)!.id)!;
    const writesAfter = (t: number) => writes.filter((w) => w.t > t);
    try {
      await until('every candidate up', () => candidates.every((c) => c.ready), 30_000).catch(
        (err: Error) => {
          throw new Error(`${err.message}\n${candidates.map((c) => c.errors()).join('\n')}`);
        },
      );
      await until('a first leader', () => writes.length > 0, 5_000);
      await sleep(300);

      // 1. The leader pauses past its lease.
      const paused = leaderNow();
      const pausedTerm = writes.at(-1)!.term!;
      paused.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      if (target.pausePassesOn) {
        await until(
          'another leader while the first is paused',
          () => writesAfter(stoppedAt).some((w) => w.id !== paused.id),
          target.crashBoundMs + 3_000,
        );
      } else {
        await sleep(TTL_MS + 500);
      }
      paused.child.kill('SIGCONT');
      const resumedAt = Date.now();
      await sleep(1_000);
      // Resumed, it knew it had lost: nothing under its old term.
      const stale = writesAfter(resumedAt + 50).filter(
        (w) => w.id === paused.id && w.term === pausedTerm,
      );
      expect(stale).toEqual([]);
      await until('a leader after the pause', () => writesAfter(resumedAt).length > 0, 5_000);

      // 2. The leader crashes.
      await sleep(200);
      const crashed = leaderNow();
      crashed.child.kill('SIGKILL');
      await crashed.exited;
      const crashedAt = Date.now();
      const failover = await until(
        'a leader after the crash',
        () => writesAfter(crashedAt).some((w) => w.id !== crashed.id),
        target.crashBoundMs + 1_000,
      );
      expect(failover).toBeLessThanOrEqual(target.crashBoundMs + 1_000);

      // 3. The leader shuts down: the last candidate leads within a second.
      await sleep(200);
      const leaving = leaderNow();
      leaving.child.kill('SIGTERM');
      const leftAt = Date.now();
      const handover = await until(
        'a leader after the shutdown',
        () => writesAfter(leftAt).some((w) => w.id !== leaving.id),
        1_000,
      );
      expect(handover).toBeLessThanOrEqual(1_000);
    } finally {
      for (const c of candidates) {
        c.child.kill('SIGCONT');
        c.child.kill('SIGKILL');
      }
      await Promise.all(candidates.map((c) => c.exited));
    }

    expect(refused).toEqual([]);
    // Ordered by time, terms never go down: never two leaders at once.
    const byTime = [...writes].sort((x, y) => x.t - y.t);
    for (let i = 1; i < byTime.length; i++) {
      expect(byTime[i].term!).toBeGreaterThanOrEqual(byTime[i - 1].term!);
    }
    // Each leadership's term is higher than the one before (a leader that lost may win again,
    // under a new term), and each term has one leader.
    const terms = [...new Set(byTime.map((w) => w.term!))];
    expect(terms.length).toBeGreaterThanOrEqual(4);
    expect([...terms].sort((x, y) => x - y)).toEqual(terms);
    for (const term of terms) {
      expect(new Set(writes.filter((w) => w.term === term).map((w) => w.id)).size).toBe(1);
    }
  }, 90_000);
});
