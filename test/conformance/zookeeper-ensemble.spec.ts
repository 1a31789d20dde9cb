import { startZkEnsemble } from '../../servers/zk-servers';
import { runLockConformance } from './lock-conformance';

// A 3-node ZooKeeper ensemble of its own; clients get every node in the connection string.
runLockConformance({
  name: 'zookeeper (3-node ensemble)',
  setup: async () => {
    const ensemble = await startZkEnsemble(3);
    return {
      config: {
        type: 'zookeeper',
        connectionString: ensemble.connectString,
        sessionTimeout: 4_000,
      },
      teardown: () => ensemble.stop(),
    };
  },
  capabilities: {
    leaseBased: false,
    fencing: true,
    waiting: 'queue-first',
    shared: true,
    permits: true,
  },
  shortTtl: 600,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});
