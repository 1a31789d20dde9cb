/**
 * One contended-bench worker process (forked by harness/contended.ts): takes the shared key in
 * a loop, holds it `holdMs`, releases, thinks `thinkMs`, and records each section's times on
 * the machine-wide monotonic clock so the runner can merge all workers' timelines.
 */
import { createContender, type ContenderName, type ServerAddresses } from './contenders';
import { machineNowMs, sleepMs } from './clock';

/** The worker's orders, passed as JSON in argv[2]. */
export interface WorkerOrders {
  contender: ContenderName;
  servers: ServerAddresses;
  key: string;
  holdMs: number;
  thinkMs: number;
}

/** One locked section, machine-clock ms: asked, granted, release sent, release answered. */
export type Section = [requestAt: number, grantAt: number, releaseAt: number, releasedAt: number];

/** Messages to the runner. */
export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'done'; sections: Section[]; statements?: number }
  | { type: 'failed'; error: string };

/** Messages from the runner. */
export type RunnerMessage = { type: 'go'; endAt: number };

async function main(): Promise<void> {
  const orders = JSON.parse(process.argv[2]) as WorkerOrders;
  const contender = await createContender(orders.contender, orders.servers);
  const send = (message: WorkerMessage): void => void process.send?.(message);
  try {
    // Connections, subscriptions and JIT warmed on a key of our own before the clock starts.
    for (let i = 0; i < 20; i++)
      await (await contender.acquire(`${orders.key}-warm-${process.pid}`)).release();
    const go = new Promise<RunnerMessage>((resolve) => process.once('message', resolve));
    send({ type: 'ready' });
    const { endAt } = await go;
    const sections: Section[] = [];
    const statementsBefore = contender.statements?.() ?? 0;
    while (machineNowMs() < endAt) {
      const requestAt = machineNowMs();
      const lock = await contender.acquire(orders.key);
      const grantAt = machineNowMs();
      await sleepMs(orders.holdMs);
      const releaseAt = machineNowMs();
      await lock.release();
      sections.push([requestAt, grantAt, releaseAt, machineNowMs()]);
      await sleepMs(orders.thinkMs);
    }
    const statements = contender.statements ? contender.statements() - statementsBefore : undefined;
    send({ type: 'done', sections, ...(statements === undefined ? {} : { statements }) });
  } catch (err) {
    send({
      type: 'failed',
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
  } finally {
    await contender.close();
    process.disconnect?.();
  }
}

void main();
