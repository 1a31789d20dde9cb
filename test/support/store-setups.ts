/**
 * Backend configurations on servers of their own, started for one target and stopped after it:
 * shared by the conformance battery's targets and the bad-input property targets.
 */
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import { startRedisCluster, startRedisNodes } from '../../servers/redis-servers';
import { startZkStandalone } from '../../servers/zk-servers';

/** A backend configuration and what removes its servers afterwards. */
export interface StoreSetup {
  config: LockBackendConfig;
  teardown?: () => Promise<void>;
}

/** A three-master Redis Cluster (redis-server processes on free ports). */
export async function redisClusterSetup(): Promise<StoreSetup> {
  const cluster = await startRedisCluster(3);
  return {
    config: { type: 'redis', clusterNodes: cluster.seeds },
    teardown: () => cluster.stop(),
  };
}

/** Redlock over three independent redis-server processes. */
export async function redlockSetup(): Promise<StoreSetup> {
  const nodes = await startRedisNodes(3);
  return {
    config: { type: 'redlock', urls: nodes.map((n) => n.url), restartGuard: false },
    teardown: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/** A standalone ZooKeeper server (java process, temp data dir), 4 s sessions. */
export async function zookeeperStandaloneSetup(): Promise<StoreSetup> {
  const zk = await startZkStandalone();
  return {
    config: { type: 'zookeeper', connectionString: zk.connectString, sessionTimeout: 4_000 },
    teardown: () => zk.destroy(),
  };
}
