/**
 * The fenced resource of the chaos harness: a tiny store that, like a database row guarded by a
 * fencing token, accepts a write only if its fence is not lower than the highest fence it has
 * accepted (the same holder may write again with the same fence; another holder with an equal
 * fence is refused). It runs in the runner process and listens on a Unix socket, so a worker cut
 * off from the lock store (black hole, network namespace) still reaches it — exactly the case
 * fencing exists for: a holder that lost its lock without noticing and writes late.
 *
 * Protocol: one JSON line per request `{worker, key, token, fence}`, answered by one JSON line
 * `{accepted, max}`. Every attempt is kept with the runner's monotonic receive time.
 */
import { createServer, createConnection, type Server, type Socket } from 'node:net';
import { rmSync } from 'node:fs';

/** One write attempt as the resource saw it. */
export interface FencedWrite {
  readonly worker: string;
  readonly key: string;
  readonly token: string;
  readonly fence: number;
  readonly accepted: boolean;
  /** Highest accepted fence of the key before this attempt (-1 if none). */
  readonly maxBefore: number;
  /** Runner's `process.hrtime.bigint()` on receipt. */
  readonly t: bigint;
}

/** A running fenced resource. */
export interface FencedResource {
  readonly socketPath: string;
  /** Every attempt so far, in the order the resource decided them. */
  writes(): readonly FencedWrite[];
  close(): Promise<void>;
}

/** Starts the resource on `socketPath` (removed first if left over, and on close). */
export async function startFencedResource(socketPath: string): Promise<FencedResource> {
  rmSync(socketPath, { force: true });
  const log: FencedWrite[] = [];
  const top = new Map<string, { fence: number; token: string }>();
  const sockets = new Set<Socket>();

  const decide = (req: { worker: string; key: string; token: string; fence: number }) => {
    const best = top.get(req.key);
    const accepted =
      best === undefined ||
      req.fence > best.fence ||
      (req.fence === best.fence && req.token === best.token);
    if (accepted) top.set(req.key, { fence: req.fence, token: req.token });
    log.push({ ...req, accepted, maxBefore: best?.fence ?? -1, t: process.hrtime.bigint() });
    return { accepted, max: Math.max(best?.fence ?? -1, accepted ? req.fence : -1) };
  };

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        const answer = decide(JSON.parse(line) as Parameters<typeof decide>[0]);
        socket.write(`${JSON.stringify(answer)}\n`);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    socketPath,
    writes: () => log,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(socketPath, { force: true });
    },
  };
}

/** The worker side: one connection, requests answered in order. */
export class FencedResourceClient {
  private readonly socket: Socket;
  private buffered = '';
  private readonly pending: ((answer: { accepted: boolean; max: number }) => void)[] = [];

  constructor(socketPath: string) {
    this.socket = createConnection(socketPath);
    this.socket.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      let nl: number;
      while ((nl = this.buffered.indexOf('\n')) >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        this.pending.shift()?.(JSON.parse(line) as { accepted: boolean; max: number });
      }
    });
  }

  /** Attempts a write guarded by `fence`; resolves whether the resource accepted it. */
  write(worker: string, key: string, token: string, fence: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push((answer) => resolve(answer.accepted));
      this.socket.write(`${JSON.stringify({ worker, key, token, fence })}\n`, (err) => {
        if (err) reject(err);
      });
    });
  }

  close(): void {
    this.socket.end();
  }
}
