/**
 * Heap per held lock: acquires N locks on distinct keys (memory backend by default; BACKEND=redis
 * for Redis) and holds them, then prints the heap growth per lock after a full GC and, with
 * SNAPSHOT=1, the growth per object type from two heap snapshots (v8.writeHeapSnapshot).
 * `node --expose-gc -r ./scripts/ts-register.cjs bench/tools/held-heap.ts [N]`
 */
import { readFileSync, unlinkSync } from 'node:fs';
import { writeHeapSnapshot } from 'node:v8';
import type { LockModuleOptions } from '../../lib';
import { startLocks } from '../harness/nest-locks';

const gc = (globalThis as { gc?: () => void }).gc;

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size and count per "type:name" of a heap snapshot file. */
function sizesByType(file: string): Map<string, { size: number; count: number }> {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map<string, { size: number; count: number }>();
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]];
    const name =
      type === 'object' || type === 'closure' ? snap.strings[snap.nodes[i + nameAt]] : '';
    const k = `${type}${name ? ':' + name : ''}`;
    const e = out.get(k) ?? { size: 0, count: 0 };
    e.size += snap.nodes[i + sizeAt];
    e.count++;
    out.set(k, e);
  }
  return out;
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 100_000);
  const backend = process.env.BACKEND ?? 'memory';
  const options: LockModuleOptions =
    backend === 'redis'
      ? { backends: { redis: { type: 'redis', url: 'redis://127.0.0.1:6379' } } }
      : { backends: { m: { type: 'memory' } } };
  const ours = await startLocks(options);
  const run = `${process.pid}`;
  // Warm every path once (JIT code, lazily built tables) so the growth is the locks' own.
  for (let i = 0; i < 100; i++) await (await ours.locks.acquire(`warm:${run}:${i}`)).release();
  const keys = Array.from({ length: n }, (_, i) => `held:${run}:${i}`);
  gc?.();
  const snapshot = process.env.SNAPSHOT === '1';
  const before = snapshot ? writeHeapSnapshot() : '';
  const heap0 = process.memoryUsage().heapUsed;
  const locks = [];
  for (let i = 0; i < n; i += 500) {
    locks.push(...(await Promise.all(keys.slice(i, i + 500).map((k) => ours.locks.acquire(k)))));
  }
  gc?.();
  const heap1 = process.memoryUsage().heapUsed;
  console.log(
    `${backend}: ${n} held locks, heap +${((heap1 - heap0) / 1024 / 1024).toFixed(1)} MB, ` +
      `${((heap1 - heap0) / n).toFixed(0)} bytes per held lock (keys excluded: allocated before)`,
  );
  if (snapshot) {
    const after = writeHeapSnapshot();
    const [a, b] = [sizesByType(before), sizesByType(after)];
    const rows = [...b]
      .map(([k, v]) => ({
        k,
        size: v.size - (a.get(k)?.size ?? 0),
        count: v.count - (a.get(k)?.count ?? 0),
      }))
      .filter((r) => Math.abs(r.size) >= n * 4)
      .sort((x, y) => y.size - x.size);
    for (const r of rows) {
      console.log(
        `${(r.size / n).toFixed(1).padStart(8)} B/lock ${(r.count / n).toFixed(2).padStart(6)} objs/lock  ${r.k}`,
      );
    }
    unlinkSync(before);
    unlinkSync(after);
  }
  for (let i = 0; i < locks.length; i += 500)
    await Promise.all(locks.slice(i, i + 500).map((l) => l.release()));
  await ours.close();
}
void main();
