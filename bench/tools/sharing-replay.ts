/**
 * Redis's own time per counted-lock script on the semaphore suite's state (permits 4, 4 holders,
 * 12 queued on 4 channels): release (its slot handed on) then the releaser queues again, in a
 * loop, one client, no holds. Each release's head waits on the releaser's channel, so the slot
 * goes to it in the release's reply, as in the suite, where a release hands it within its own
 * process. Reports INFO commandstats' µs per EVALSHA (the two scripts together), each command's
 * calls per round and µs per call, and the client's round trip per script.
 * `node -r ./scripts/ts-register.cjs bench/tools/sharing-replay.ts [rounds]`
 */
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { ACQUIRE as SHARED_ACQUIRE } from '../../lib/backends/redis/scripts/acquire';
import { RELEASE as SHARED_RELEASE } from '../../lib/backends/redis/scripts/release';
import { scriptKeys } from './raw-scripts';

const PERMITS = 4;

async function evalUsec(r: Redis): Promise<Map<string, [number, number]>> {
  const info = await r.info('commandstats');
  const out = new Map<string, [number, number]>();
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
    out.set(m[1], [Number(m[2]), Number(m[3])]);
  }
  return out;
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 20_000);
  const r = new Redis('redis://127.0.0.1:6379');
  const key = `replay-${randomUUID()}`;
  const keys = scriptKeys(key);
  const acqSha = (await r.script('LOAD', SHARED_ACQUIRE.source)) as string;
  const relSha = (await r.script('LOAD', SHARED_RELEASE.source)) as string;
  const channels = [0, 1, 2, 3].map((i) => `ch-${i}-${randomUUID()}`);
  const workers: { token: string; channel: string }[] = Array.from({ length: 16 }, (_, i) => ({
    token: randomUUID(),
    channel: channels[i % 4],
  }));
  const acquire = async (w: { token: string; channel: string }): Promise<number[]> =>
    (await r.evalsha(
      acqSha,
      keys.length,
      ...keys,
      w.token,
      30_000,
      3_000,
      `3000 ${w.token}|p${PERMITS} ${w.channel}`,
      'x',
      PERMITS,
    )) as number[];
  const holders: { token: string; channel: string }[] = [];
  for (const w of workers) {
    const got = await acquire(w);
    if (got[0] === 1) holders.push(w);
  }
  if (holders.length !== PERMITS) throw new Error(`${holders.length} holders`);
  const byToken = new Map(workers.map((w) => [w.token, w]));
  const before = await evalUsec(r);
  let relUs = 0;
  let acqUs = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) {
    const w = holders.shift()!;
    const a = process.hrtime.bigint();
    const out = (await r.evalsha(relSha, keys.length, ...keys, w.token, w.channel)) as unknown[];
    const b = process.hrtime.bigint();
    relUs += Number(b - a) / 1000;
    if (out[0] !== 1) throw new Error(`release: ${JSON.stringify(out)}`);
    // "<token>|p4 <fence> <slot>": the head, told in the reply (it waits on this channel).
    const next = byToken.get(String(out[1]).split('|')[0]);
    if (!next) throw new Error(`release handed nothing on: ${JSON.stringify(out)}`);
    const c = process.hrtime.bigint();
    const again = await acquire(w);
    acqUs += Number(process.hrtime.bigint() - c) / 1000;
    if (again[0] !== 0) throw new Error(`re-acquire: ${JSON.stringify(again)}`);
    holders.push(next);
  }
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  const after = await evalUsec(r);
  const [c0, u0] = before.get('evalsha') ?? [0, 0];
  const [c1, u1] = after.get('evalsha')!;
  console.log(
    `rounds ${rounds}: Redis µs per EVALSHA ${((u1 - u0) / (c1 - c0)).toFixed(1)} (both scripts), ` +
      `client round trip µs release ${(relUs / rounds).toFixed(1)} acquire ${(acqUs / rounds).toFixed(1)}, wall ${wall.toFixed(0)} ms`,
  );
  for (const [name, [c, u]] of after) {
    const [pc, pu] = before.get(name) ?? [0, 0];
    if (c - pc >= rounds / 2 && name !== 'evalsha')
      console.log(
        `  ${name.padEnd(16)} per round ${((c - pc) / rounds).toFixed(2)}  µs/call ${((u - pu) / (c - pc)).toFixed(2)}`,
      );
  }
  // Not KEYS[2] (the fence bucket counter other keys share) nor the bucket-count key.
  await r.del(...[0, 2, 3, 4, 5].map((i) => keys[i]));
  r.disconnect();
}

void main();
