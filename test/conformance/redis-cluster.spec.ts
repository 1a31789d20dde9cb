import { redisClusterSetup } from '../support/store-setups';
import { runLockConformance } from './lock-conformance';

// A three-master Redis Cluster of its own (redis-server processes on free ports).
runLockConformance({
  name: 'redis cluster (3 masters)',
  setup: redisClusterSetup,
  capabilities: {
    leaseBased: true,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
  },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});
