import { startRedisCluster } from '../../servers/redis-servers';
import { runLockConformance } from './lock-conformance';

// A three-master Redis Cluster of its own (redis-server processes on free ports).
runLockConformance({
  name: 'redis cluster (3 masters)',
  setup: async () => {
    const cluster = await startRedisCluster(3);
    return {
      config: { type: 'redis', clusterNodes: cluster.seeds },
      teardown: () => cluster.stop(),
    };
  },
  capabilities: { leaseBased: true, fencing: true, waiting: 'queue' },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
});
