/**
 * ZooKeeper cycle parts (profiling aid, not a benchmark): starts a standalone ZooKeeper (or uses
 * ZK_CONNECT), counts the client requests per acquire + release of ours and of the raw recipe,
 * then times both interleaved. `node -r ./scripts/ts-register.cjs bench/tools/zk-cycle.ts [rounds]`
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';
import { createContender, type Contender } from '../harness/contenders';

const zookeeper = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as {
  createClient(...args: unknown[]): object;
};
const counts = new Map<string, number>();
const latency = new Map<string, number>();
/** Sends and replies of the traced cycles, in order. */
const events: [string, number][] = [];

/** Counts every request method called on clients made from now on. */
function countRequests(): void {
  const create = zookeeper.createClient;
  zookeeper.createClient = (...args: unknown[]) => {
    const client = create(...args) as Record<string, unknown>;
    const proto = Object.getPrototypeOf(client) as Record<string, unknown>;
    if (!proto.__counted) {
      proto.__counted = true;
      for (const m of [
        'create',
        'exists',
        'getChildren',
        'remove',
        'mkdirp',
        'getData',
        'setData',
      ]) {
        const orig = proto[m] as (...a: unknown[]) => unknown;
        proto[m] = function (this: unknown, ...a: unknown[]) {
          counts.set(m, (counts.get(m) ?? 0) + 1);
          const cb = a[a.length - 1] as (...r: unknown[]) => void;
          const t0 = performance.now();
          events.push([`${m}>`, t0]);
          a[a.length - 1] = (...r: unknown[]) => {
            events.push([`<${m}`, performance.now()]);
            latency.set(m, (latency.get(m) ?? 0) + performance.now() - t0);
            cb(...r);
          };
          return orig.apply(this, a);
        };
      }
    }
    return client;
  };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 5);
  countRequests();
  const zkConnect = process.env.ZK_CONNECT ?? (await startZkStandalone()).connectString;
  const servers = { redisUrl: 'redis://127.0.0.1:6379', zkConnect };
  const ours = await createContender('ours-zookeeper', servers);
  const raw = await createContender('raw-zookeeper', servers);
  try {
    for (const [name, c] of [
      ['ours', ours],
      ['raw', raw],
    ] as [string, Contender][]) {
      for (let i = 0; i < 20; i++) await (await c.acquire(`count-${name}`)).release();
      counts.clear();
      latency.clear();
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < 200; i++) await (await c.acquire(`count-${name}`)).release();
      const us = ((performance.now() - t0) * 1000) / 200;
      const cpu = process.cpuUsage(cpu0);
      console.log(
        `${name}: client CPU ${((cpu.user + cpu.system) / 200).toFixed(0)} us/cycle (user ${(cpu.user / 200).toFixed(0)})`,
      );
      // One traced cycle's timeline, averaged over 50: each step's offset from the cycle start.
      const steps = new Map<string, number[]>();
      for (let i = 0; i < 50; i++) {
        events.length = 0;
        const start = performance.now();
        const lock = await c.acquire(`count-${name}`);
        events.push(['granted', performance.now()]);
        await lock.release();
        events.push(['released', performance.now()]);
        events.forEach(([e, t], j) => {
          const k = `${j} ${e}`;
          steps.set(k, [...(steps.get(k) ?? []), (t - start) * 1000]);
        });
      }
      const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
      console.log(
        `${name} timeline (median us from start):`,
        [...steps].map(([k, v]) => `${k.split(' ')[1]}@${median(v).toFixed(0)}`).join(' '),
      );
      console.log(
        `${name}: ${us.toFixed(0)} us/cycle;`,
        [...counts]
          .map(
            ([m, n]) =>
              `${m} ${(n / 200).toFixed(2)} x ${((latency.get(m)! * 1000) / n).toFixed(0)} us`,
          )
          .join(', '),
      );
    }
    // Interleaved turns of 50 cycles each, wall and client CPU tallied per contender.
    const tally = { ours: { wall: 0, cpu: 0, n: 0 }, raw: { wall: 0, cpu: 0, n: 0 } };
    for (let round = 0; round < rounds * 10; round++) {
      for (const [name, c] of [
        ['raw', raw],
        ['ours', ours],
      ] as ['raw' | 'ours', Contender][]) {
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < 50; i++) await (await c.acquire(`cyc-${name}`)).release();
        const cpu = process.cpuUsage(cpu0);
        tally[name].wall += (performance.now() - t0) * 1000;
        tally[name].cpu += cpu.user + cpu.system;
        tally[name].n += 50;
      }
    }
    for (const [name, t] of Object.entries(tally)) {
      console.log(
        `${name}: ${(t.wall / t.n).toFixed(0)} us/cycle wall, ${(t.cpu / t.n).toFixed(0)} us/cycle client CPU`,
      );
    }
    console.log(`ours ÷ raw (rate) ${(tally.raw.wall / tally.ours.wall).toFixed(3)}`);
  } finally {
    await ours.close();
    await raw.close();
    if (!process.env.ZK_CONNECT) await stopAllZk();
  }
}
void main();
