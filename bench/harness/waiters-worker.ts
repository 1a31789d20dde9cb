/**
 * One process of a waiters run (forked by harness/waiters.ts): `loops` concurrent
 * waiters on one shared key, each taking it, holding it `holdMs`, releasing, and asking again
 * at once, every section timed on the machine-wide monotonic clock.
 */
import { machineNowMs, sleepMs } from './clock';
import { sendToRunner } from './worker-process';
import type { Section } from './contended-worker';
import { startLocks } from './nest-locks';
import type { LockModuleOptions } from '../../lib';

/** The worker's orders, passed as JSON in argv[2]. */
export interface WaitersOrders {
  /** The module this process boots (its defaults give the waiters their waitTimeout). */
  options: LockModuleOptions;
  key: string;
  /** Concurrent waiters in this process. */
  loops: number;
  holdMs: number;
}

/** Messages to the runner; `sections[i]` are waiter i's. */
export type WaitersMessage =
  { type: 'ready' } | { type: 'done'; sections: Section[][] } | { type: 'failed'; error: string };

/** Messages from the runner. */
export type WaitersCommand = { type: 'go'; endAt: number };

async function main(): Promise<void> {
  const orders = JSON.parse(process.argv[2]) as WaitersOrders;
  const send = (message: WaitersMessage): Promise<void> => sendToRunner(message);
  const app = await startLocks(orders.options);
  try {
    // Connections, subscriptions and JIT warmed on a key of our own before the clock starts.
    for (let i = 0; i < 20; i++)
      await (await app.locks.acquire(`${orders.key}-warm-${process.pid}`)).release();
    // process.on, never once: with no 'message' listener left Node unrefs the IPC channel, and
    // a last message still being written (a large one) dies with a process whose loop emptied.
    const go = new Promise<WaitersCommand>((resolve) => process.on('message', resolve));
    await send({ type: 'ready' });
    const { endAt } = await go;
    const waiter = async (): Promise<Section[]> => {
      const sections: Section[] = [];
      while (machineNowMs() < endAt) {
        const requestAt = machineNowMs();
        const lock = await app.locks.acquire(orders.key);
        const grantAt = machineNowMs();
        await sleepMs(orders.holdMs);
        const releaseAt = machineNowMs();
        await lock.release();
        sections.push([requestAt, grantAt, releaseAt, machineNowMs()]);
      }
      return sections;
    };
    await send({
      type: 'done',
      sections: await Promise.all(Array.from({ length: orders.loops }, waiter)),
    });
  } catch (err) {
    await send({
      type: 'failed',
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
  } finally {
    await app.close();
    process.disconnect?.();
  }
}

void main();
