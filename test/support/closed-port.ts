import { createServer } from 'node:net';

/**
 * A port on 127.0.0.1 that nothing listens on (taken from the kernel, then freed): connecting
 * to it is refused at once (ECONNREFUSED), like a store that is down.
 */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
