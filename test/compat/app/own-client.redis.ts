// The app's own client, for an app on node-redis (`redis` 5): the cell compiles it in as
// own-client.ts (each own-client.*.ts imports only its package, the one the cell's app has).
import { createClient } from 'redis';

/**
 * A connected client of the app's own on `url`, as node-redis wants it: `connect()` called
 * and an 'error' listener (without one a connection error is thrown from the emitter). The app
 * closes it (the module never does).
 */
export async function connectOwnClient(url: string) {
  const client = createClient({ url });
  client.on('error', (err: Error) => console.error(`own node-redis client: ${err.message}`));
  await client.connect();
  return { client, close: (): Promise<void> => client.close() };
}
