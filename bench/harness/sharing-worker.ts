/**
 * One process of a sharing run (forked by harness/sharing-load.ts): `loops` concurrent workers
 * on one key, each asking for it (a write with probability `writeShare`, else a read), holding
 * it `holdMs`, releasing and asking again at once; every section timed on the machine-wide
 * monotonic clock so the runner can count the holders at each instant across processes.
 */
import { machineNowMs, sleepMs } from './clock';
import { sendToRunner } from './worker-process';
import type { Section } from './contended-worker';
import { createSharingLock, type SharingContender } from './sharing-contenders';

/** The worker's orders, passed as JSON in argv[2]. */
export interface SharingOrders {
  contender: SharingContender;
  redisUrl: string;
  key: string;
  loops: number;
  holdMs: number;
  /** Pause after each release before asking again (0: at once). */
  thinkMs: number;
  /** Fraction of requests that are writes (1: every request is; a semaphore's are all alike). */
  writeShare: number;
}

/** A section and whether it was a write. */
export type SharingSection = [...Section, write: 0 | 1];

/** Messages to the runner; `sections[i]` are loop i's. */
export type SharingMessage =
  | { type: 'ready' }
  | { type: 'done'; sections: SharingSection[][] }
  | { type: 'failed'; error: string };

/** Messages from the runner. */
export type SharingCommand = { type: 'go'; endAt: number };

async function main(): Promise<void> {
  const orders = JSON.parse(process.argv[2]) as SharingOrders;
  const send = (message: SharingMessage): Promise<void> => sendToRunner(message);
  const lock = await createSharingLock(orders.contender, orders.redisUrl);
  try {
    // Connections, scripts and JIT warmed on a key of our own before the clock starts.
    const warmKey = `${orders.key}-warm-${process.pid}`;
    for (let i = 0; i < 20; i++) {
      await (await lock.acquire(warmKey, Math.random() < orders.writeShare)).release();
    }
    // process.on, never once: with no listener left Node unrefs the IPC channel (see waiters).
    const go = new Promise<SharingCommand>((resolve) => process.on('message', resolve));
    await send({ type: 'ready' });
    const { endAt } = await go;
    const loop = async (): Promise<SharingSection[]> => {
      const sections: SharingSection[] = [];
      while (machineNowMs() < endAt) {
        const write = Math.random() < orders.writeShare;
        const requestAt = machineNowMs();
        const held = await lock.acquire(orders.key, write);
        const grantAt = machineNowMs();
        await sleepMs(orders.holdMs);
        const releaseAt = machineNowMs();
        await held.release();
        sections.push([requestAt, grantAt, releaseAt, machineNowMs(), write ? 1 : 0]);
        if (orders.thinkMs > 0) await sleepMs(orders.thinkMs);
      }
      return sections;
    };
    await send({
      type: 'done',
      sections: await Promise.all(Array.from({ length: orders.loops }, loop)),
    });
  } catch (err) {
    await send({
      type: 'failed',
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
  } finally {
    await lock.close();
    process.disconnect?.();
  }
}

void main();
