/**
 * The scale suite's holder process (forked by harness/held.ts with --expose-gc): takes `n`
 * distinct locks with ttl 3 s and autoRenew, then sits still while the watchdog renews them, so
 * its CPU time over the steady window is exactly what holding them costs the client. A process
 * of its own: the runner's probes, IPC and earlier suites' garbage stay out of its figures.
 */
import { LockError, type Lock } from '../../lib';
import { sleepMs } from './clock';
import { startLocks } from './nest-locks';
import { scaleModuleOptions, type ScaleStore } from './scale-store';
import { StatementCounter } from './statement-counter';

/** The holder's orders, passed as JSON in argv[2]. */
export interface HeldOrders {
  store: ScaleStore;
  keyPrefix: string;
  /** Locks to hold at once. */
  n: number;
  ttlMs: number;
}

/** Messages to the runner. */
export type HeldMessage =
  | {
      type: 'held';
      /** Heap growth per held lock after a forced GC, bytes. */
      heapPerLockBytes: number;
      /** Time taken to acquire all `n`, ms. */
      acquireMs: number;
      /** Acquisitions that failed (the store did not answer in time). */
      notAcquired: number;
    }
  | {
      type: 'done';
      windowMs: number;
      /** Process CPU time (user + system) over the window, ms. */
      cpuMs: number;
      /** PostgreSQL: statements sent over the window; else null. */
      statements: number | null;
      /** Locks lost since they were taken (the figures are void if any). */
      lost: number;
      /** Locks still held at the end of the window. */
      stillHeld: number;
    }
  | { type: 'failed'; error: string };

/** Messages from the runner. */
export type HeldCommand = { type: 'go'; windowMs: number };

/** Acquisitions in flight while taking the `n` locks (enough to keep the store busy). */
const ACQUIRE_CONCURRENCY = 200;

function collectGarbage(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the holder needs --expose-gc');
  // One full collection: with 100k locks held it pauses the process for a few hundred ms,
  // within the 2 s a lease has left at its renewal; a second would only add to the pause.
  gc();
}

async function main(): Promise<void> {
  const orders = JSON.parse(process.argv[2]) as HeldOrders;
  const send = (message: HeldMessage): void => void process.send?.(message);
  const counter = orders.store.kind === 'postgres' ? new StatementCounter() : undefined;
  const app = await startLocks(
    scaleModuleOptions(
      orders.store,
      // The keys are distinct, nobody else holds them: a wait is only a slow store (PostgreSQL's
      // pool of 10 shared with the renewals of the locks already held).
      { ttl: orders.ttlMs, autoRenew: true, waitTimeout: 60_000 },
      orders.keyPrefix,
      counter,
    ),
  );
  const { locks } = app;
  try {
    // Connections, table and JIT warmed first, so the heap baseline has them already.
    for (let i = 0; i < 200; i++) await (await locks.acquire(`warm-${i % 20}`)).release();
    collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;
    const started = performance.now();
    // Held the way an application holds them: it keeps each handle to release it later.
    const held: Lock[] = [];
    let notAcquired = 0;
    let next = 0;
    const taker = async (): Promise<void> => {
      for (let i = next++; i < orders.n; i = next++) {
        try {
          held.push(await locks.acquire(`held-${i}`));
        } catch (err) {
          // A store that cannot keep up (PostgreSQL's pool busy with the renewals of the locks
          // already held) times an acquisition out: counted, as what the store can do.
          if (!(err instanceof LockError)) throw err;
          notAcquired++;
        }
        // A memory grant resolves in microtasks only: without a turn of the event loop the
        // takers would starve the renewal timers of the locks already held, and 100k
        // acquisitions outlast the 3 s ttl. An application's requests come from I/O anyway.
        await new Promise(setImmediate);
      }
    };
    await Promise.all(Array.from({ length: ACQUIRE_CONCURRENCY }, taker));
    const acquireMs = performance.now() - started;
    collectGarbage();
    const heapPerLockBytes = (process.memoryUsage().heapUsed - heapBefore) / held.length;
    // process.on, never once: with no 'message' listener left Node unrefs the IPC channel, and
    // a last message still being written (a large one) dies with a process whose loop emptied.
    const go = new Promise<HeldCommand>((resolve) => process.on('message', resolve));
    send({ type: 'held', heapPerLockBytes, acquireMs, notAcquired });
    const { windowMs } = await go;

    const statementsBefore = counter?.count ?? 0;
    const cpuBefore = process.cpuUsage();
    const windowStart = performance.now();
    await sleepMs(windowMs);
    const cpu = process.cpuUsage(cpuBefore);
    const measuredMs = performance.now() - windowStart;
    // isHeld() turns a lease past its deadline into a loss on the spot: count the held first,
    // so the losses it finds are in the lost count.
    const stillHeld = held.filter((lock) => lock.isHeld()).length;
    send({
      type: 'done',
      windowMs: measuredMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      statements: counter ? counter.count - statementsBefore : null,
      lost: locks.getMetrics().store.lock_lost_total,
      stillHeld,
    });
  } catch (err) {
    send({
      type: 'failed',
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
  }
  // The runner kills this process: releasing 100k locks one by one would only cost time, and
  // the store is the suite's own (dropped or stopped afterwards).
}

void main();
