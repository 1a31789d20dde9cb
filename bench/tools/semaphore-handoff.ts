/**
 * Where a counted lock's hand-off time goes (the semaphore suite's load: permits 4, 16 workers
 * over 4 processes, hold 5 ms): every grant is paired with the release that freed its slot, and
 * the gap between them is split where the release script was written to the socket, where its
 * reply was parsed and where the hand-over message reached the next holder's process (same
 * process or another). Also the gap implied by the rate (4 / rate - mean hold), Redis's time per
 * command (INFO commandstats deltas) and each process's CPU. `PEER=1` runs redis-semaphore's
 * Semaphore instead (rate, hold and release round trip only), `PEER=2` our own scripts through a
 * bare client without the module (see `Bare`); `CPUPROF=1` writes each worker's
 * CPU profile to /tmp/semprobe/prof (`CPUPROF_US`: its sampling interval in µs, default 1,000);
 * `HOLD_MS` sets the hold (default 5, the suite's).
 * `node -r ./scripts/ts-register.cjs bench/tools/semaphore-handoff.ts [seconds] [processes] [workers]`
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import { machineNowMs, sleepMs } from '../harness/clock';
import { startLocks } from '../harness/nest-locks';
import { summarize } from '../harness/stats';
import { ACQUIRE as SHARED_ACQUIRE } from '../../lib/backends/redis/scripts/acquire';
import { RELEASE as SHARED_RELEASE } from '../../lib/backends/redis/scripts/release';
import { scriptKeys } from './raw-scripts';

/**
 * `PEER=2`: our Redis protocol (the same scripts, keys, queue and hand-over) driven by a bare
 * client with none of the engine around it: what our hand-off costs without the module's layers.
 * A probe only: a waiter never refreshes its place or retries after a lapsed lease, and the node
 * must already count the default fence buckets (as any earlier run of the module leaves it).
 */
class Bare {
  private readonly channel = `bare-${randomUUID()}`;
  private readonly waiting = new Map<string, (grant: [number, number]) => void>();
  private constructor(
    private readonly client: Redis,
    private readonly subscriber: Redis,
  ) {
    subscriber.on('message', (_channel: string, message: string) => this.told(message));
  }

  static async start(): Promise<Bare> {
    const bare = new Bare(new Redis(URL), new Redis(URL));
    await bare.subscriber.subscribe(bare.channel);
    for (const s of [SHARED_ACQUIRE, SHARED_RELEASE]) await bare.client.script('LOAD', s.source);
    return bare;
  }

  private told(message: string): void {
    const [tagged, fence, slot] = message.split(' ');
    const resolve = this.waiting.get(tagged);
    if (!resolve) return;
    this.waiting.delete(tagged);
    resolve([Number(fence), Number(slot)]);
  }

  async take(
    key: string,
  ): Promise<{ release(): Promise<unknown>; permit: number; fence: number; token: string }> {
    const keys = scriptKeys(key);
    const token = randomUUID();
    const tagged = `${token}|p${PERMITS}`;
    const handed = new Promise<[number, number]>((resolve) => this.waiting.set(tagged, resolve));
    const reply = (await this.client.evalsha(
      SHARED_ACQUIRE.sha,
      keys.length,
      ...keys,
      token,
      30_000,
      3_000,
      `3000 ${tagged} ${this.channel}`,
      'x',
      PERMITS,
    )) as number[];
    let grant: [number, number];
    if (reply[0] === 1 || reply[0] === 2) {
      this.waiting.delete(tagged);
      grant = [reply[1], reply[2]];
    } else grant = await handed;
    return {
      permit: grant[1],
      fence: grant[0],
      token,
      release: async () => {
        const out = (await this.client.evalsha(
          SHARED_RELEASE.sha,
          keys.length,
          ...keys,
          token,
          this.channel,
        )) as string[];
        for (let i = 1; i < out.length; i++) this.told(out[i]);
      },
    };
  }
}

const URL = 'redis://127.0.0.1:6379';
const PERMITS = 4;
/** Each section's hold: the suite's 5 ms unless `HOLD_MS` says otherwise. */
const HOLD_MS = Number(process.env.HOLD_MS ?? 5);
if (!Number.isFinite(HOLD_MS) || HOLD_MS < 0) {
  throw new Error(`HOLD_MS must be a number of ms >= 0, got ${process.env.HOLD_MS}`);
}

/**
 * [requested, granted, release called, release answered, slot, fence, message arrived or 0,
 * release script written or 0, pid, release reply parsed or 0].
 */
type Row = [number, number, number, number, number, number, number, number, number, number];

interface Done {
  rows: Row[];
  cpuMs: number;
}

async function worker(key: string, loops: number, startAt: number, endAt: number): Promise<void> {
  // The hand-over message's arrival, by fence: the subscriber's 'message' event, first seen.
  const arrived = new Map<number, number>();
  const emit = Redis.prototype.emit;
  Redis.prototype.emit = function (this: Redis, event: string | symbol, ...args: unknown[]) {
    if (event === 'message') {
      arrived.set(Number(String(args[1]).split(' ')[1]), machineNowMs());
    }
    return emit.call(this, event, ...args);
  };
  // When each release script went to the client (ioredis sendCommand), by token.
  const releaseSent = new Map<string, number>();
  const releaseReplied = new Map<string, number>();
  const send = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function (this: Redis, command, stream) {
    const c = command as unknown as { name: string; args: unknown[] };
    if (c.name === 'evalsha' && c.args[0] === SHARED_RELEASE.sha) {
      const token = String(c.args[2 + Number(c.args[1])]);
      releaseSent.set(token, machineNowMs());
      const cmd = command as unknown as { resolve: (v: unknown) => void };
      const resolve = cmd.resolve;
      cmd.resolve = (v) => {
        releaseReplied.set(token, machineNowMs());
        resolve(v);
      };
    }
    return send.call(this, command, stream);
  };
  const app = await startLocks({
    backends: { store: { type: 'redis', url: URL, startup: 'fail' } },
    defaults: { waitTimeout: 60_000, ttl: 30_000 },
  });
  const peer = process.env.PEER === '1' ? new Redis(URL) : undefined;
  const bare = process.env.PEER === '2' ? await Bare.start() : undefined;
  const take = async (
    k: string,
  ): Promise<{
    release(): Promise<unknown>;
    permit?: number;
    fence?: number | null;
    token?: string;
  }> => {
    if (bare) return bare.take(k);
    if (!peer) return app.locks.acquire(k, { permits: PERMITS });
    const s = new Semaphore(peer, k, PERMITS, { acquireTimeout: 60_000 });
    await s.acquire();
    return { release: () => s.release(), permit: 0, fence: 0, token: '' };
  };
  for (let i = 0; i < 20; i++) {
    await (await take(`${key}-warm-${process.pid}`)).release();
  }
  while (machineNowMs() < startAt) await sleepMs(1);
  const cpu = process.cpuUsage();
  const loop = async (): Promise<Row[]> => {
    const rows: Row[] = [];
    while (machineNowMs() < endAt) {
      const askedAt = machineNowMs();
      const lock = await take(key);
      const grantedAt = machineNowMs();
      await sleepMs(HOLD_MS);
      const releaseAt = machineNowMs();
      await lock.release();
      rows.push([
        askedAt,
        grantedAt,
        releaseAt,
        machineNowMs(),
        lock.permit ?? -1,
        Number(lock.fence),
        arrived.get(Number(lock.fence)) ?? 0,
        releaseSent.get(lock.token ?? '') ?? 0,
        process.pid,
        releaseReplied.get(lock.token ?? '') ?? 0,
      ]);
    }
    return rows;
  };
  const rows = (await Promise.all(Array.from({ length: loops }, loop))).flat();
  const used = process.cpuUsage(cpu);
  const done: Done = { rows, cpuMs: (used.user + used.system) / 1000 };
  await new Promise<void>((resolve) => process.send!(done, undefined, {}, () => resolve()));
  peer?.disconnect();
  await app.close();
  process.exit(0);
}

function commandStats(info: string): Map<string, { calls: number; usec: number }> {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const line of info.split('\n')) {
    const m = /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line);
    if (m) stats.set(m[1], { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return stats;
}

function redisCpu(info: string): number {
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)![1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]);
  return (user + sys) * 1000;
}

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 10);
  const processes = Number(process.argv[3] ?? 4);
  const workers = Number(process.argv[4] ?? 16);
  const key = `probe-${randomUUID().slice(0, 8)}`;
  const redis = new Redis(URL);
  // Start far enough ahead for every process to boot; the window starts then.
  const startAt = machineNowMs() + 4_000;
  const endAt = startAt + seconds * 1000;
  const results = Array.from({ length: processes }, (_, p) => {
    const child = fork(
      __filename,
      ['worker', key, String(workers / processes), String(startAt), String(endAt)],
      {
        execArgv: [
          ...(process.env.CPUPROF
            ? [
                '--cpu-prof',
                '--cpu-prof-dir=/tmp/semprobe/prof',
                // Finer than the default 1 ms: a hand-off's steps are tens of µs.
                `--cpu-prof-interval=${process.env.CPUPROF_US ?? 1000}`,
              ]
            : []),
          '-r',
          `${process.cwd()}/scripts/ts-register.cjs`,
        ],
      },
    );
    return new Promise<Done>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Done));
      child.once('exit', (code) => reject(new Error(`worker ${p} exited ${code}`)));
      setTimeout(
        () => reject(new Error(`worker ${p} sent nothing`)),
        seconds * 1000 + 60_000,
      ).unref();
    });
  });
  while (machineNowMs() < startAt) await sleepMs(5);
  const before = await redis.info('commandstats');
  const cpuBefore = redisCpu(await redis.info('cpu'));
  const done = await Promise.all(results);
  const after = await redis.info('commandstats');
  const cpuAfter = redisCpu(await redis.info('cpu'));
  const rows = done.flatMap((d) => d.rows).filter((r) => r[1] > startAt + 1000);
  const window = (endAt - startAt - 1000) / 1000;
  const holdMean = summarize(rows.map((r) => r[2] - r[1])).mean;
  const rate = rows.length / window;
  console.log(
    `${process.env.PEER === '1' ? 'redis-semaphore' : process.env.PEER === '2' ? 'bare' : 'ours'}: grants/s ${rate.toFixed(0)}, mean hold ${holdMean.toFixed(3)}, implied gap ${((PERMITS * 1000) / rate - holdMean).toFixed(3)} ms, release round trip p50 ${summarize(rows.map((r) => r[3] - r[2])).p50.toFixed(3)}`,
  );
  // Each grant paired with the latest release of its slot before it.
  const bySlot = new Map<number, Row[]>();
  for (const r of done.flatMap((d) => d.rows)) {
    const list = bySlot.get(r[4]) ?? [];
    list.push(r);
    bySlot.set(r[4], list);
  }
  const gap: number[] = [];
  const sameGap: number[] = [];
  const otherGap: number[] = [];
  const parsedToGrant: number[] = [];
  const toMessage: number[] = [];
  const messageToGrant: number[] = [];
  const releaseRt: number[] = [];
  const toSend: number[] = [];
  const sendToMessage: number[] = [];
  for (const list of bySlot.values()) {
    list.sort((a, b) => a[1] - b[1]);
    for (let i = 1; i < list.length; i++) {
      const [prev, next] = [list[i - 1], list[i]];
      if (next[1] < startAt + 1000) continue;
      gap.push(next[1] - prev[2]);
      (next[8] === prev[8] ? sameGap : otherGap).push(next[1] - prev[2]);
      if (next[8] === prev[8] && prev[9] > 0) parsedToGrant.push(next[1] - prev[9]);
      releaseRt.push(prev[3] - prev[2]);
      if (prev[7] > 0) {
        toSend.push(prev[7] - prev[2]);
        if (next[6] > 0) sendToMessage.push(next[6] - prev[7]);
      }
      if (next[6] > 0) {
        toMessage.push(next[6] - prev[2]);
        messageToGrant.push(next[1] - next[6]);
      }
    }
  }
  const show = (name: string, xs: number[]): void => {
    const s = summarize(xs);
    console.log(
      `${name.padEnd(34)} n ${String(xs.length).padStart(6)}  mean ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)}  p50 ${s.p50.toFixed(3)}  p99 ${s.p99.toFixed(3)}  max ${s.max.toFixed(3)}`,
    );
  };
  show('release sent -> next grant (ms)', gap);
  show('release sent -> message arrived', toMessage);
  show('  same process', sameGap);
  show('  another process', otherGap);
  show('message arrived -> grant', messageToGrant);
  show('same: reply parsed -> next grant', parsedToGrant);
  show('release called -> script written', toSend);
  show('script written -> message arrived', sendToMessage);
  show('release round trip (holder)', releaseRt);
  const okRows = rows.filter((r) => r[7] > 0 && r[9] > 0);
  show(
    '  called -> written',
    okRows.map((r) => r[7] - r[2]),
  );
  show(
    '  written -> reply parsed',
    okRows.map((r) => r[9] - r[7]),
  );
  show(
    '  reply parsed -> release resolved',
    okRows.map((r) => r[3] - r[9]),
  );
  const total = (endAt - startAt) / 1000;
  console.log(
    `CPU % of a core: workers ${done.map((d) => ((d.cpuMs / 1000 / total) * 100).toFixed(1)).join(' ')}, redis ${(((cpuAfter - cpuBefore) / 1000 / total) * 100).toFixed(1)}`,
  );
  const b = commandStats(before);
  for (const [name, a] of commandStats(after)) {
    const calls = a.calls - (b.get(name)?.calls ?? 0);
    if (calls <= 0) continue;
    const usec = a.usec - (b.get(name)?.usec ?? 0);
    console.log(
      `${name.padEnd(12)} ${(calls / total).toFixed(0).padStart(7)} calls/s  ${(usec / calls).toFixed(1).padStart(7)} µs/call  per grant ${(calls / total / (rows.length / window)).toFixed(2)}`,
    );
  }
  redis.disconnect();
  process.exit(0);
}

if (process.argv[2] === 'worker') {
  void worker(
    process.argv[3],
    Number(process.argv[4]),
    Number(process.argv[5]),
    Number(process.argv[6]),
  );
} else {
  void main();
}
