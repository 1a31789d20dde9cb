// The app's own client, for an app on iovalkey: the cell compiles it in as own-client.ts (each
// own-client.*.ts imports only its package, the one the cell's app has).
import { Redis } from 'iovalkey';

/** A connected client of the app's own on `url`; the app closes it (the module never does). */
export async function connectOwnClient(url: string) {
  const client = new Redis(url, { lazyConnect: true });
  await client.connect();
  return {
    client,
    close: async (): Promise<void> => {
      await client.quit();
    },
  };
}
