// A small TCP proxy (on 127.0.0.1 unless told otherwise) for fault injection between a client and a server: cut every
// connection, black-hole the traffic, or cut a connection right after a chosen request has
// reached the server. Node built-ins only (toxiproxy is not installable, `tc netem` not usable).
import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** What to do with one chunk the client sent: see TcpProxy.onClientData. */
export type ClientDataVerdict = 'forward' | 'forward-then-cut' | 'drop';
/** Judges one chunk from client connection `conn` (see TcpProxy.onClientData). */
export type ClientDataHook = (chunk: Buffer, conn: number) => ClientDataVerdict;

/** A running proxy from `address` to its target. */
export interface TcpProxy {
  port: number;
  /** `<listen host>:<port>` */
  address: string;
  /** Destroys every current connection, both the client's and the server's side. */
  cutAll(): void;
  /**
   * While on, connections are accepted and held but nothing is forwarded in either direction
   * (new ones are not even connected to the target). Like a network black hole, what was sent
   * meanwhile is delivered, in order, once it is turned off (closes included) if the
   * connection is still there.
   */
  blackhole(on: boolean): void;
  /**
   * Called for every chunk from a client (connection numbers start at 1) before it is forwarded:
   * `forward` it, `drop` it, or `forward-then-cut` — write it to the server, and once written,
   * destroy both sides (the server gets the request, the client never gets the answer; what the
   * client sends afterwards is dropped). `null` removes the hook.
   */
  onClientData(hook: ClientDataHook | null): void;
  /** Client connections currently open through the proxy. */
  connections(): number;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

/** One item held while black-holed: data, or the sender's end of the stream. */
type Held = Buffer | 'end';

/** One client connection and its connection to the target. */
class Link {
  /** Client to server, held while black-holed or not connected yet. */
  readonly toServer: Held[] = [];
  /** Server to client, held while black-holed. */
  readonly toClient: Held[] = [];
  upstream: Socket | undefined;
  /** Set by 'forward-then-cut': nothing more is forwarded either way. */
  cutting = false;

  constructor(
    readonly id: number,
    readonly client: Socket,
  ) {}
}

/** True while `socket` can still be written to. */
const writable = (socket: Socket | undefined): socket is Socket =>
  socket !== undefined && !socket.destroyed && !socket.writableEnded;

/**
 * Starts a proxy listening on a free port of `listenHost` (default 127.0.0.1; a network
 * namespace's clients need the host side of their veth link) that forwards each connection to
 * `targetHost:targetPort` (default host 127.0.0.1). A connection the target refuses is closed.
 */
export async function startTcpProxy(
  targetPort: number,
  targetHost = '127.0.0.1',
  listenHost = '127.0.0.1',
): Promise<TcpProxy> {
  const links = new Map<number, Link>();
  let nextId = 1;
  let holding = false;
  let hook: ClientDataHook | null = null;

  /** Destroys both sides of a link at once. */
  const cut = (link: Link): void => {
    link.cutting = true;
    link.client.destroy();
    link.upstream?.destroy();
    links.delete(link.id);
  };

  /**
   * One side has closed: close the other too — after flushing, when it was ended gracefully
   * (a FIN passed on), else at once — and forget the link once both are gone.
   */
  const sideClosed = (link: Link, other: Socket | undefined): void => {
    if (other && !other.destroyed) {
      if (other.writableEnded) other.destroySoon();
      else other.destroy();
    }
    if (link.client.destroyed && (!link.upstream || link.upstream.destroyed)) {
      links.delete(link.id);
    }
  };

  /** Forwards one client chunk (or end) to the server, through the hook. */
  const toServer = (link: Link, item: Held): void => {
    const upstream = link.upstream;
    if (link.cutting || !writable(upstream)) return;
    if (item === 'end') {
      upstream.end();
      return;
    }
    const verdict = hook ? hook(item, link.id) : 'forward';
    if (verdict === 'drop') return;
    if (verdict === 'forward-then-cut') {
      link.cutting = true; // set before the server can answer: the answer is never passed on
      upstream.write(item, () => cut(link));
      return;
    }
    upstream.write(item);
  };

  const toClient = (link: Link, item: Held): void => {
    if (link.cutting || !writable(link.client)) return;
    if (item === 'end') link.client.end();
    else link.client.write(item);
  };

  /** Connects a link to the target, wires the server side and sends what the client sent. */
  const connectUpstream = (link: Link): void => {
    const upstream = createConnection({ host: targetHost, port: targetPort });
    link.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk: Buffer) => {
      if (holding) link.toClient.push(chunk);
      else toClient(link, chunk);
    });
    upstream.on('end', () => {
      if (holding) link.toClient.push('end');
      else toClient(link, 'end');
    });
    upstream.on('error', () => undefined); // 'close' follows
    upstream.on('close', () => {
      if (!holding) sideClosed(link, link.client); // else release() passes it on
    });
    for (const item of link.toServer.splice(0)) toServer(link, item);
  };

  /** Delivers what was held while black-holed, closes included; connects the new links. */
  const release = (): void => {
    for (const link of [...links.values()]) {
      if (!link.upstream) {
        if (link.client.destroyed) {
          links.delete(link.id); // came and went during the black hole: never reached the server
          continue;
        }
        connectUpstream(link);
      } else {
        for (const item of link.toServer.splice(0)) toServer(link, item);
      }
      for (const item of link.toClient.splice(0)) toClient(link, item);
      if (link.client.destroyed) sideClosed(link, link.upstream);
      if (link.upstream?.destroyed) sideClosed(link, link.client);
    }
  };

  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    const link = new Link(nextId++, client);
    links.set(link.id, link);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      if (holding || !link.upstream) link.toServer.push(chunk);
      else toServer(link, chunk);
    });
    client.on('end', () => {
      if (holding || !link.upstream) link.toServer.push('end');
      else toServer(link, 'end');
    });
    client.on('error', () => undefined); // 'close' follows
    client.on('close', () => {
      if (!holding) sideClosed(link, link.upstream); // else release() passes it on
    });
    if (!holding) connectUpstream(link);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: listenHost, port: 0 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (typeof address !== 'object' || address === null) {
    server.close();
    throw new Error('startTcpProxy: the proxy has no TCP address');
  }
  const port = address.port;

  return {
    port,
    address: `${listenHost}:${port}`,
    cutAll: () => {
      for (const link of [...links.values()]) cut(link);
    },
    blackhole: (on) => {
      if (on === holding) return;
      holding = on;
      if (!on) release();
    },
    onClientData: (next) => {
      hook = next;
    },
    connections: () => [...links.values()].filter((l) => !l.client.destroyed).length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const link of [...links.values()]) cut(link);
        server.close(() => resolve());
      }),
  };
}
