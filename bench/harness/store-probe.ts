import Redis from 'ioredis';
import { startTcpProxy } from '../../servers/tcp-proxy';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../../servers/databases';
import { zkFourLetter } from '../../servers/zk-servers';
import { connectZk, ensureZkNode } from './contenders';
import { RespRequestCounter } from './resp-request-counter';
import type { ScaleStore } from './scale-store';

/**
 * What the scale suite reads from a store, from outside the process using it: its footprint
 * (what a lock leaves behind) and, on Redis, the requests clients sent and the commands it ran.
 */
export interface StoreProbe {
  /** The store as clients must reach it for the counts to see them (Redis: through a proxy). */
  store: ScaleStore;
  /**
   * Redis: keys on the node (DBSIZE; the node is the suite's own, emptied when the probe
   * starts, so the shared fence counters count too); PostgreSQL: rows in the lock table;
   * ZooKeeper: znodes under the lock root (the server's znode count less the count with the
   * root empty: the server is the suite's own); memory: always 0 (nothing outside the process).
   */
  footprint(): Promise<number>;
  /**
   * Redis only: requests clients sent through {@link store} (counted on the wire by a proxy:
   * each is a command the client sent, a script call counting once).
   */
  requests?(): number;
  /**
   * Redis only: commands the node has run (INFO `total_commands_processed`, which counts the
   * commands a script runs too), this probe's own INFO calls left out.
   */
  commands?(): Promise<number>;
  close(): Promise<void>;
}

/**
 * A probe of `store`. A Redis node is emptied first (FLUSHALL): it must be the suite's own, so
 * that what it holds afterwards is all the run's doing, fence counters included.
 */
export async function probeStore(store: ScaleStore): Promise<StoreProbe> {
  switch (store.kind) {
    case 'memory':
      return { store, footprint: async () => 0, close: async () => undefined };
    case 'redis':
      return redisProbe(store.url);
    case 'postgres':
      return postgresProbe(store.table);
    case 'zookeeper':
      return zookeeperProbe(store.connect, store.root);
  }
}

async function redisProbe(url: string): Promise<StoreProbe> {
  // One connection for the probe's life: connecting sends commands of its own (ready check).
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  await client.flushall();
  let infoCalls = 0;
  // INFO counts the commands scripts run as well; what a client asked (the store calls of a
  // renewal, batched or not) is only seen on the wire.
  const proxy = await startTcpProxy(Number(new URL(url).port));
  const counters = new Map<number, RespRequestCounter>();
  proxy.onClientData((chunk, conn) => {
    let counter = counters.get(conn);
    if (!counter) counters.set(conn, (counter = new RespRequestCounter()));
    counter.push(chunk);
    return 'forward';
  });
  return {
    store: { kind: 'redis', url: `redis://${proxy.address}` },
    requests: () => [...counters.values()].reduce((sum, c) => sum + c.count, 0),
    footprint: () => client.dbsize(),
    commands: async () => {
      const info = await client.info('stats');
      const total = Number(/total_commands_processed:(\d+)/.exec(info)?.[1]);
      if (!Number.isFinite(total)) throw new Error('INFO stats has no total_commands_processed');
      // The counter is bumped after a command runs: this INFO is not in its own answer, every
      // earlier one of this probe is.
      return total - infoCalls++;
    },
    close: async () => {
      client.disconnect();
      await proxy.close();
    },
  };
}

async function postgresProbe(table: string): Promise<StoreProbe> {
  const source = new DataSource({
    ...dataSourceOptions('postgres', { poolSize: 1 }),
  } as unknown as ConstructorParameters<typeof DataSource>[0]);
  await source.initialize();
  return {
    store: { kind: 'postgres', table },
    footprint: async () => {
      // The backend creates its table on first use: none yet is no rows.
      const [exists] = (await source.query('SELECT to_regclass($1) IS NOT NULL AS present', [
        table,
      ])) as Array<{ present: boolean }>;
      if (!exists.present) return 0;
      const [row] = (await source.query(`SELECT count(*)::int AS n FROM "${table}"`)) as Array<{
        n: number;
      }>;
      return row.n;
    },
    close: () => source.destroy(),
  };
}

async function zookeeperProbe(connect: string, root: string): Promise<StoreProbe> {
  const port = Number(connect.split(':')[1]);
  const client = await connectZk(connect);
  try {
    await ensureZkNode(client, root);
  } finally {
    client.close();
  }
  const znodes = async (): Promise<number> => {
    const mntr = await zkFourLetter(port, 'mntr');
    const count = Number(/zk_znode_count\s+(\d+)/.exec(mntr)?.[1]);
    if (!Number.isFinite(count)) throw new Error('mntr has no zk_znode_count');
    return count;
  };
  const empty = await znodes();
  return {
    store: { kind: 'zookeeper', connect, root },
    footprint: async () => (await znodes()) - empty,
    close: async () => undefined,
  };
}
