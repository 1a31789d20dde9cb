/**
 * Splits an uncontended Redis cycle into its parts, interleaved in one process (ratios only):
 * the raw floor, redis-semaphore's Mutex, our two scripts sent raw through ioredis (the store's
 * and the client library's share), our backend called directly (its own client-side share) and
 * LockService.acquire + release (plus the engine's share).
 * `node -r ./scripts/ts-register.cjs bench/tools/cycle-parts.ts [rounds]`
 */
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { startLocks } from '../harness/nest-locks';
import { compareInterleaved, pairedRatio, type Variant } from '../harness/rounds';
import { loadRawScripts, rawScriptCycle } from './raw-scripts';
import { newOwnerToken } from '../../lib/core/shared/token';
import { Redactor } from '../../lib/core/shared/redactor';
import { redisBackendFactory } from '../../lib/backends/redis/redis.factory';

const URL = 'redis://127.0.0.1:6379';
const CAD = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 5);
  const raw = new Redis(URL);
  raw.defineCommand('cad', { numberOfKeys: 1, lua: CAD });
  const peer = new Redis(URL);
  const scripts = new Redis(URL);
  const ours = await startLocks({ backends: { redis: { type: 'redis', url: URL } } });
  const run = randomUUID().slice(0, 8);
  const backend = await redisBackendFactory.create({ type: 'redis', url: URL }, 'direct', {
    resolve: () => undefined,
    redactor: new Redactor(),
    keyPrefix: '',
    defaultTtl: 30_000,
  });
  await loadRawScripts(scripts);
  const variants: Variant[] = [
    {
      name: 'raw floor (SET NX PX + EVALSHA cad)',
      op: async () => {
        const token = randomUUID();
        if ((await raw.set(`floor:${run}`, token, 'PX', 30_000, 'NX')) !== 'OK')
          throw new Error('busy');
        await (raw as unknown as { cad(k: string, t: string): Promise<number> }).cad(
          `floor:${run}`,
          token,
        );
      },
    },
    {
      name: 'redis-semaphore Mutex',
      op: async () => {
        const m = new Mutex(peer, `sem:${run}`);
        await m.acquire();
        await m.release();
      },
    },
    {
      name: 'our scripts, raw EVALSHA',
      op: rawScriptCycle(scripts, `scripts:${run}`),
    },
    {
      name: 'our backend alone (no engine)',
      op: async () => {
        const token = newOwnerToken();
        if (!(await backend.tryAcquire({ key: `direct:${run}`, token, ttlMs: 30_000 })))
          throw new Error('busy');
        await backend.release(`direct:${run}`, token, { mode: 'exclusive', permits: 1 });
      },
    },
    {
      name: 'ours (LockService)',
      op: async () => {
        const lock = await ours.locks.acquire(`ours:${run}`);
        await lock.release();
      },
    },
  ];
  // Client CPU per cycle of each variant (user + system, this process), tallied op by op.
  const cpu = variants.map(() => ({ us: 0, n: 0 }));
  const timed: Variant[] = variants.map((v, i) => ({
    name: v.name,
    op: async () => {
      const before = process.cpuUsage();
      await v.op();
      const used = process.cpuUsage(before);
      cpu[i].us += used.user + used.system;
      cpu[i].n++;
    },
  }));
  const results = await compareInterleaved(timed, { rounds, roundMs: 1000, warmupMs: 500 });
  const ourResult = results[4];
  results.forEach((r, i) => {
    console.log(
      `${r.name.padEnd(38)} ${r.usPerOp.toFixed(1).padStart(7)} us/cycle   ours÷this ${pairedRatio(ourResult, r).toFixed(3)}   client CPU ${(cpu[i].us / cpu[i].n).toFixed(1)} us/cycle`,
    );
  });
  raw.disconnect();
  peer.disconnect();
  scripts.disconnect();
  await ours.close();
  await backend.close();
}
void main();
