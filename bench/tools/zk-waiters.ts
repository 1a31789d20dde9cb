/**
 * ZooKeeper waiters on one key (profiling aid for issue 18, not a benchmark): starts a standalone
 * ZooKeeper (or uses ZK_CONNECT) and runs N waiters on one key, each taking it, holding it 1 ms,
 * releasing and asking again, for a window; prints the sections, the client requests per section
 * (by method, with the children read), and what the backend logged (session replacements).
 *
 * `node -r ./scripts/ts-register.cjs bench/tools/zk-waiters.ts [waiters=1000] [seconds=5] [mode]`
 * mode `local` (default): all waiters in this process, one session, requests counted;
 * mode `harness`: the scale suite's own runner (4 worker processes), no counting.
 */
import 'reflect-metadata';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Module, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockModule, LockService } from '../../lib';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';
import { machineNowMs, sleepMs } from '../harness/clock';
import { scaleModuleOptions, type ScaleStore } from '../harness/scale-store';
import { summarize } from '../harness/stats';
import { runWaiters } from '../harness/waiters';

const zookeeper = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as {
  createClient(...args: unknown[]): object;
};
const counts = new Map<string, number>();
/** Names returned by every getChildren reply, summed: the bytes a herd would cost. */
let childrenRead = 0;

/** Counts every request method called on clients made from now on. */
function countRequests(): void {
  const create = zookeeper.createClient;
  zookeeper.createClient = (...args: unknown[]) => {
    const client = create(...args) as Record<string, unknown>;
    const proto = Object.getPrototypeOf(client) as Record<string, unknown>;
    if (proto.__counted) return client;
    proto.__counted = true;
    for (const m of ['create', 'exists', 'getChildren', 'remove', 'mkdirp', 'transaction']) {
      const orig = proto[m] as (...a: unknown[]) => unknown;
      proto[m] = function (this: unknown, ...a: unknown[]) {
        counts.set(m, (counts.get(m) ?? 0) + 1);
        if (m === 'getChildren') {
          const cb = a[a.length - 1] as (...r: unknown[]) => void;
          a[a.length - 1] = (...r: unknown[]) => {
            if (Array.isArray(r[1])) childrenRead += r[1].length;
            cb(...r);
          };
        }
        return orig.apply(this, a);
      };
    }
    return client;
  };
}

/** Keeps the backend's warnings and errors (session replacements, unreachable ensemble). */
class Collector implements LoggerService {
  readonly lines: string[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.lines.push(`warn ${String(message)}`);
  }
  error(message: unknown): void {
    this.lines.push(`error ${String(message)}`);
  }
}

async function local(store: ScaleStore, waiters: number, seconds: number): Promise<void> {
  countRequests();
  const logs = new Collector();
  const options = scaleModuleOptions(store, { waitTimeout: 300_000, ttl: 30_000 }, 'zkw:');
  @Module({ imports: [LockModule.forRoot(options)] })
  class WaitersModule {}
  const app = await NestFactory.createApplicationContext(WaitersModule, { logger: logs });
  const locks = app.get(LockService);
  for (let i = 0; i < 20; i++) await (await locks.acquire('warm')).release();
  counts.clear();
  childrenRead = 0;
  const cpu0 = process.cpuUsage();
  const t0 = machineNowMs();
  const endAt = t0 + seconds * 1000;
  const grants: number[] = [];
  const waits: number[] = [];
  let lastReport = t0;
  let lastGrants = 0;
  const waiter = async (): Promise<number> => {
    let mine = 0;
    while (machineNowMs() < endAt) {
      const asked = machineNowMs();
      const lock = await locks.acquire('one-key');
      const now = machineNowMs();
      grants.push(now);
      waits.push(now - asked);
      mine++;
      if (now - lastReport >= 1000) {
        console.log(
          `  t=${((now - t0) / 1000).toFixed(1)} s: ${grants.length - lastGrants} sections in the last ${((now - lastReport) / 1000).toFixed(1)} s`,
        );
        lastReport = now;
        lastGrants = grants.length;
      }
      await sleepMs(1);
      await lock.release();
    }
    return mine;
  };
  const per = await Promise.all(Array.from({ length: waiters }, waiter));
  const wall = (machineNowMs() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const inWindow = grants.filter((g) => g < endAt).length;
  const sections = grants.length;
  console.log(
    `${waiters} waiters, one session: ${inWindow} sections in ${seconds} s (${(inWindow / seconds).toFixed(1)}/s); all ${sections} done after ${wall.toFixed(1)} s; sections per waiter ${Math.min(...per)}-${Math.max(...per)}`,
  );
  const w = summarize(waits);
  console.log(
    `wait p50 / p99 / max ms: ${w.p50.toFixed(0)} / ${w.p99.toFixed(0)} / ${w.max.toFixed(0)}; client CPU ${(((cpu.user + cpu.system) / 1e6 / wall) * 100).toFixed(0)}% of a core`,
  );
  console.log(
    'requests per section:',
    [...counts].map(([m, n]) => `${m} ${(n / sections).toFixed(2)}`).join(', '),
    `| names read per section ${(childrenRead / sections).toFixed(0)}`,
  );
  console.log(`backend warnings/errors: ${logs.lines.length}`);
  for (const line of logs.lines.slice(0, 10)) console.log(`  ${line.slice(0, 200)}`);
  await app.close();
}

async function main(): Promise<void> {
  const waiters = Number(process.argv[2] ?? 1000);
  const seconds = Number(process.argv[3] ?? 5);
  const mode = process.argv[4] ?? 'local';
  const connect = process.env.ZK_CONNECT ?? (await startZkStandalone()).connectString;
  const store: ScaleStore = { kind: 'zookeeper', connect, root: `/zkw-${process.pid}` };
  try {
    if (mode === 'harness') {
      const r = await runWaiters(store, waiters, seconds * 1000);
      console.log(
        `${r.waiters} waiters (${r.processes} processes): ${r.sections} sections, ${r.opsPerSec.toFixed(1)}/s; wait p50 / p99 / max ms ${r.waitMs.p50.toFixed(0)} / ${r.waitMs.p99.toFixed(0)} / ${r.waitMs.max.toFixed(0)}; per waiter ${r.minPerWaiter}-${r.maxPerWaiter}; jain ${r.jain.toFixed(3)}`,
      );
    } else {
      await local(store, waiters, seconds);
    }
  } finally {
    if (!process.env.ZK_CONNECT) await stopAllZk();
  }
}
void main();
