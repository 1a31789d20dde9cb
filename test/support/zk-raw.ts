/**
 * A raw ZooKeeper client (no lock library) for specs that look at what the zookeeper backend
 * leaves in the store, with the few reads they make, promisified.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ZkClient, ZkModule, ZkStat } from '../../lib/backends/zookeeper/zk-types';
import { zkCode } from '../../lib/backends/zookeeper/zk-types';

/** The client package, loaded as the library loads it (an optional peer). */
export const zk = createRequire(join(process.cwd(), 'package.json'))(
  'node-zookeeper-client',
) as ZkModule;

/** A connected raw client, optionally with digest credentials. */
export async function rawClient(
  connectString: string,
  sessionTimeout: number,
  credentials?: string,
): Promise<ZkClient> {
  const client = zk.createClient(connectString, { sessionTimeout });
  if (credentials) client.addAuthInfo('digest', Buffer.from(credentials));
  await new Promise<void>((resolve) => {
    client.once('connected', () => resolve());
    client.connect();
  });
  return client;
}

/** Children of `path`, as the server lists them ([] when it does not exist). */
export function childrenOf(client: ZkClient, path: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    client.getChildren(path, undefined, (err, children) => {
      if (zkCode(err) === zk.Exception.NO_NODE) resolve([]);
      else if (err) reject(err);
      else resolve(children);
    }),
  );
}

/** Stat of `path`, `null` when it does not exist. */
export function statOf(client: ZkClient, path: string): Promise<ZkStat | null> {
  return new Promise((resolve, reject) =>
    client.exists(path, undefined, (err, s) => (err ? reject(err) : resolve(s))),
  );
}

/** Data of `path` as text. */
export function textOf(client: ZkClient, path: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.getData(path, undefined, (err, data) =>
      err ? reject(err) : resolve(data?.toString() ?? ''),
    ),
  );
}
