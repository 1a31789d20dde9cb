/**
 * What Redis itself spends on each script of the uncontended mutex cycle, and on cut-down
 * copies of the acquire (no fence, no wait-queue check, an empty script), from `INFO
 * commandstats` after `CONFIG RESETSTAT`: the store's share of the cycle, which no client-side
 * work can win back. Each variant runs `CALLS` times per repetition, `REPS` repetitions
 * interleaved; prints each variant's median µs per EVALSHA.
 * `node -r ./scripts/ts-register.cjs bench/tools/script-cost.ts`
 */
import Redis from 'ioredis';
import { MUTEX_ACQUIRE, MUTEX_RELEASE } from '../../lib/backends/redis/scripts/mutex';
import { scriptKeys } from './raw-scripts';

const CALLS = Number(process.env.CALLS ?? 20_000);
const REPS = Number(process.env.REPS ?? 5);

/** Scripts called with the lean acquire's KEYS (lock, queue, counter) and ARGV (token, ttl). */
const ACQUIRES: Record<string, string> = {
  'acquire (ours)': MUTEX_ACQUIRE.source,
  'acquire without the fence draw': `
if redis.call('exists', KEYS[1], KEYS[2]) ~= 0 then return nil end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`,
  'SET PX alone, in a script': `
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`,
  'empty script': 'return 1',
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function usPerCall(admin: Redis, command: string, run: () => Promise<unknown>) {
  await admin.config('RESETSTAT');
  for (let i = 0; i < CALLS; i++) await run();
  const line = (await admin.info('commandstats'))
    .split('\n')
    .find((l) => l.startsWith(`cmdstat_${command}:`));
  return Number(/usec_per_call=([\d.]+)/.exec(line ?? '')?.[1] ?? NaN);
}

async function main(): Promise<void> {
  const admin = new Redis();
  const client = new Redis();
  const [lock, queue, counter] = scriptKeys(`script-cost:${process.pid}`);
  const runs = new Map<string, () => Promise<unknown>>();
  for (const [name, source] of Object.entries(ACQUIRES)) {
    const sha = (await client.script('LOAD', source)) as string;
    runs.set(name, async () => {
      await client.evalsha(sha, 3, lock, queue, counter, 'a-token-of-16-chars', 30_000);
      await client.del(lock);
    });
  }
  const release = (await client.script('LOAD', MUTEX_RELEASE.source)) as string;
  runs.set('release (ours)', async () => {
    await client.set(lock, 'a-token-of-16-chars 1', 'PX', 30_000);
    await client.evalsha(release, 1, lock, 'a-token-of-16-chars');
  });
  const semaphore = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
  const cad = (await client.script('LOAD', semaphore)) as string;
  runs.set("compare-and-delete (the peers' release)", async () => {
    await client.set(lock, 'a-token', 'PX', 30_000);
    await client.evalsha(cad, 1, lock, 'a-token');
  });
  const samples = new Map<string, number[]>([...runs.keys()].map((k) => [k, []]));
  for (let rep = 0; rep < REPS; rep++) {
    for (const [name, run] of runs) samples.get(name)!.push(await usPerCall(admin, 'evalsha', run));
  }
  const set = await usPerCall(admin, 'set', () =>
    client.set(lock, 'a-token', 'PX', 30_000, 'NX').then(() => client.del(lock)),
  );
  for (const [name, values] of samples) {
    console.log(`${name.padEnd(42)} ${median(values).toFixed(2)} µs per EVALSHA in Redis`);
  }
  console.log(
    `${"SET NX PX (the peers' acquire)".padEnd(42)} ${set.toFixed(2)} µs per SET in Redis`,
  );
  admin.disconnect();
  client.disconnect();
}

void main();
