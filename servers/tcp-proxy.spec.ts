import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConnection, type Socket } from 'node:net';
import { findFreePort } from './child-processes';
import { eventually as pollUntil } from './harness-checks';
import { redisCommand, startRedisNode, stopAll, type RedisNode } from './redis-servers';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

/** A raw client connection that records what it receives and when it is closed. */
class Conn {
  received = '';
  isClosed = false;
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (this.received += d));
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      socket.on('close', () => {
        this.isClosed = true;
        resolve();
      }),
    );
  }

  static open(port: number): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => resolve(new Conn(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends one Redis command (inline form). */
  send(command: string): void {
    this.socket.write(`${command}\r\n`);
  }

  /** Waits until `text` has been received in full (true) or `timeoutMs` passed (false). */
  async receives(text: string, timeoutMs = 2_000): Promise<boolean> {
    return eventually(() => this.received.includes(text), timeoutMs);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Polls `check` every 10 ms until it holds (true) or `timeoutMs` (default 2 s) passes (false). */
const eventually = (check: () => boolean, timeoutMs = 2_000): Promise<boolean> =>
  pollUntil(check, timeoutMs, 10);

/** Client connections the redis server has, the one asking included. */
async function redisClients(port: number): Promise<number> {
  const reply = await redisCommand(port, 'CLIENT', 'LIST');
  return reply.split('\n').filter((line) => line.includes(' addr=')).length;
}

describe('tcp-proxy', () => {
  let redis: RedisNode;
  const proxies: TcpProxy[] = [];
  const conns: Conn[] = [];

  const proxy = async (): Promise<TcpProxy> => {
    const p = await startTcpProxy(redis.port);
    proxies.push(p);
    return p;
  };
  const open = async (p: TcpProxy): Promise<Conn> => {
    const c = await Conn.open(p.port);
    conns.push(c);
    return c;
  };

  beforeAll(async () => {
    redis = await startRedisNode();
  });

  afterAll(async () => {
    for (const c of conns) c.close();
    await Promise.all(proxies.map((p) => p.close()));
    await stopAll();
  });

  it('forwards both ways and counts its connections', async () => {
    const p = await proxy();
    expect(p.address).toBe(`127.0.0.1:${p.port}`);
    expect(p.port).not.toBe(redis.port);
    expect(await redisCommand(p.port, 'PING')).toBe('+PONG\r\n');

    const c = await open(p);
    c.send('SET greeting hello');
    expect(await c.receives('+OK\r\n')).toBe(true);
    c.send('GET greeting');
    expect(await c.receives('$5\r\nhello\r\n')).toBe(true);
    expect(p.connections()).toBe(1);
    expect(await redisClients(redis.port)).toBe(2); // the proxied one and this one

    c.close();
    expect(await eventually(() => p.connections() === 0)).toBe(true);
    expect(await eventually(() => false, 100)).toBe(false); // let redis see the close
    expect(await redisClients(redis.port)).toBe(1);
  });

  it('cutAll destroys both sides of every connection; new connections still work', async () => {
    const p = await proxy();
    const [a, b] = [await open(p), await open(p)];
    a.send('PING');
    b.send('PING');
    expect((await a.receives('+PONG')) && (await b.receives('+PONG'))).toBe(true);
    expect(p.connections()).toBe(2);

    p.cutAll();

    await Promise.all([a.closed, b.closed]);
    expect(p.connections()).toBe(0);
    expect(await eventually(() => false, 100)).toBe(false);
    expect(await redisClients(redis.port)).toBe(1); // the server side is gone too
    expect(await redisCommand(p.port, 'PING')).toBe('+PONG\r\n');
  });

  it('blackhole holds connections and forwards nothing until it is lifted', async () => {
    const p = await proxy();
    const before = await open(p);
    before.send('PING');
    expect(await before.receives('+PONG\r\n')).toBe(true);
    before.received = '';

    p.blackhole(true);
    before.send('SET hole 1');
    const during = await open(p); // accepted, but not connected to the server
    during.send('PING');
    expect(await before.receives('+OK', 300)).toBe(false);
    expect(await during.receives('+PONG', 100)).toBe(false);
    expect(before.isClosed || during.isClosed).toBe(false);
    expect(p.connections()).toBe(2);
    expect(await redisCommand(redis.port, 'GET', 'hole')).toBe('$-1\r\n');
    expect(await redisClients(redis.port)).toBe(2); // `before` and this one

    p.blackhole(false);
    expect(await before.receives('+OK\r\n')).toBe(true);
    expect(await during.receives('+PONG\r\n')).toBe(true);
    expect(await redisCommand(redis.port, 'GET', 'hole')).toBe('$1\r\n1\r\n');
  });

  it("onClientData 'forward-then-cut' delivers the request, then cuts before the answer", async () => {
    const p = await proxy();
    const seen: Array<{ chunk: string; conn: number }> = [];
    p.onClientData((chunk, conn) => {
      seen.push({ chunk: chunk.toString(), conn });
      return chunk.includes('SET cut') ? 'forward-then-cut' : 'forward';
    });
    const c = await open(p);
    c.send('PING');
    expect(await c.receives('+PONG\r\n')).toBe(true);

    c.send('SET cut 42');
    await c.closed;
    expect(c.received).toBe('+PONG\r\n'); // never the +OK
    expect(await redisCommand(redis.port, 'GET', 'cut')).toBe('$2\r\n42\r\n');
    expect(seen.map((s) => s.chunk)).toEqual(['PING\r\n', 'SET cut 42\r\n']);
    expect(new Set(seen.map((s) => s.conn)).size).toBe(1);
    expect(p.connections()).toBe(0);

    p.onClientData(null);
    expect(await redisCommand(p.port, 'PING')).toBe('+PONG\r\n');
  });

  it("onClientData 'drop' keeps a chunk from the server", async () => {
    const p = await proxy();
    let dropped = 0;
    p.onClientData((chunk) => {
      if (!chunk.includes('SET dropped')) return 'forward';
      dropped++;
      return 'drop';
    });
    const c = await open(p);
    c.send('SET dropped 1');
    expect(await eventually(() => dropped === 1)).toBe(true); // one chunk, not merged with PING
    c.send('PING');
    expect(await c.receives('+PONG\r\n')).toBe(true);
    expect(c.received).toBe('+PONG\r\n');
    expect(await redisCommand(redis.port, 'EXISTS', 'dropped')).toBe(':0\r\n');
  });

  it('closes a connection the target refuses, and stops listening on close()', async () => {
    const nowhere = await startTcpProxy(await findFreePort());
    const c = await Conn.open(nowhere.port);
    await c.closed;
    expect(nowhere.connections()).toBe(0);
    await nowhere.close();

    const p = await startTcpProxy(redis.port);
    const open1 = await Conn.open(p.port);
    await p.close();
    await open1.closed;
    await expect(Conn.open(p.port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
