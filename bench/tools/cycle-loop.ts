/**
 * A profiling loop (not a benchmark): one client acquiring and releasing a free key back to
 * back, with the V8 CPU profiler (node:inspector) on around the measured loop only, and Redis
 * INFO commandstats per cycle. MODE: ours | scripts (our two scripts via raw EVALSHA) | floor
 * (SET NX PX + compare-and-delete) | semaphore (redis-semaphore Mutex); BACKEND=memory or
 * BACKEND=zookeeper (ZK_CONNECT, else a standalone server started here) runs ours there. Writes PROFILE (a .cpuprofile) when set.
 * `MODE=ours SECONDS=5 PROFILE=/tmp/ours.cpuprofile node -r ./scripts/ts-register.cjs bench/tools/cycle-loop.ts`
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import Redis from 'ioredis';
import { Mutex } from 'redis-semaphore';
import type { LockModuleOptions } from '../../lib';
import { loadRawScripts, rawScriptCycle } from './raw-scripts';
import { newOwnerToken } from '../../lib/core/shared/token';
import { startLocks } from '../harness/nest-locks';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';

const URL = 'redis://127.0.0.1:6379';
const CAD = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
const mode = process.env.MODE ?? 'ours';
const backend = process.env.BACKEND ?? 'redis';
const seconds = Number(process.env.SECONDS ?? 5);

function post(session: Session, method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) =>
    session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result))),
  );
}

async function main(): Promise<void> {
  const zkConnect =
    backend === 'zookeeper'
      ? (process.env.ZK_CONNECT ?? (await startZkStandalone()).connectString)
      : '';
  const options: LockModuleOptions =
    backend === 'memory'
      ? { backends: { m: { type: 'memory' } } }
      : backend === 'zookeeper'
        ? { backends: { zk: { type: 'zookeeper', connectionString: zkConnect } } }
        : { backends: { redis: { type: 'redis', url: URL } } };
  const ours = await startLocks(options);
  const admin = new Redis(URL);
  const client = new Redis(URL);
  client.defineCommand('cad', { numberOfKeys: 1, lua: CAD });
  await loadRawScripts(client);
  const key = `prof:${process.pid}`;
  const ops: Record<string, () => Promise<unknown>> = {
    ours: async () => {
      const lock = await ours.locks.acquire(key);
      await lock.release();
    },
    scripts: rawScriptCycle(client, key),
    floor: async () => {
      const token = newOwnerToken();
      await client.set(key, token, 'PX', 30_000, 'NX');
      await (client as unknown as { cad(k: string, t: string): Promise<number> }).cad(key, token);
    },
    semaphore: async () => {
      const mutex = new Mutex(client, key);
      await mutex.acquire();
      await mutex.release();
    },
  };
  const op = ops[mode];
  for (let i = 0; i < (backend === 'zookeeper' ? 300 : 3000); i++) await op();
  const session = new Session();
  if (process.env.PROFILE) {
    session.connect();
    await post(session, 'Profiler.enable');
    await post(session, 'Profiler.setSamplingInterval', { interval: 100 });
    await post(session, 'Profiler.start');
  }
  if (backend === 'redis') await admin.config('RESETSTAT');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  let n = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 10; i++) await op();
    n += 10;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (process.env.PROFILE) {
    const { profile } = (await post(session, 'Profiler.stop')) as { profile: unknown };
    writeFileSync(process.env.PROFILE, JSON.stringify(profile));
    session.disconnect();
  }
  console.log(
    `${mode}/${backend}: ${n} cycles, ${((ms * 1000) / n).toFixed(2)} us/cycle wall, ` +
      `${((cpu.user + cpu.system) / n).toFixed(2)} us/cycle client CPU (user ${(cpu.user / n).toFixed(2)}, sys ${(cpu.system / n).toFixed(2)})`,
  );
  if (backend === 'redis') {
    const info = await admin.info('commandstats');
    for (const line of info.split('\n')) {
      const m = /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line);
      if (m && m[1] !== 'config')
        console.log(
          `  ${m[1]}: ${(Number(m[2]) / n).toFixed(2)} calls/cycle, ${(Number(m[3]) / n).toFixed(2)} us/cycle in Redis`,
        );
    }
  }
  admin.disconnect();
  client.disconnect();
  await ours.close();
  if (backend === 'zookeeper' && !process.env.ZK_CONNECT) await stopAllZk();
}
void main();
