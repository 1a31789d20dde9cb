import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** A forked bench worker and the messages it sends, awaited one type at a time. */
export interface WorkerProcess<M extends { type: string }> {
  child: ChildProcess;
  /**
   * The next message of `type` (earlier ones of other types are dropped), within `ms`. Rejects
   * when the worker reports `failed`, exits first, or says nothing in time.
   */
  next<T extends M['type']>(type: T, ms: number): Promise<Extract<M, { type: T }>>;
  /** SIGKILL, unless it already exited; resolves once it has. */
  kill(): Promise<void>;
}

/**
 * Forks `script` (a .ts file under the repo, run through scripts/ts-register.cjs) with `orders`
 * as JSON in argv[2] and `nodeArgs` (e.g. --expose-gc) before the script.
 */
export function forkWorker<M extends { type: string }>(
  script: string,
  orders: unknown,
  nodeArgs: readonly string[] = [],
): WorkerProcess<M> {
  const child = fork(join(process.cwd(), script), [JSON.stringify(orders)], {
    execArgv: [...nodeArgs, '-r', join(process.cwd(), 'scripts/ts-register.cjs')],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const inbox: M[] = [];
  let wake: (() => void) | undefined;
  let exited: string | undefined;
  child.on('message', (message: M) => {
    inbox.push(message);
    wake?.();
  });
  // 'close', not 'exit': a worker that sends a large message and exits at once can be seen to
  // exit before that message is delivered; 'close' comes after its IPC channel is drained.
  const gone = new Promise<void>((resolve) =>
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      exited = `exited (${code ?? signal})`;
      wake?.();
      resolve();
    }),
  );
  return {
    child,
    async next(type, ms) {
      const deadline = performance.now() + ms;
      for (;;) {
        const message = inbox.shift();
        if (message?.type === type) return message as Extract<M, { type: typeof type }>;
        if (message?.type === 'failed') {
          throw new Error(`${script} failed: ${(message as { error?: string }).error}`);
        }
        if (message) continue;
        if (exited) throw new Error(`${script} ${exited} before sending "${type}"`);
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`${script} sent no "${type}" within ${ms} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await gone;
    },
  };
}

/**
 * In a forked worker: sends `message` to the runner and resolves once it is written (`send`'s
 * `false` only means queued): disconnecting before that loses a large message.
 */
export function sendToRunner(message: { type: string }): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}
