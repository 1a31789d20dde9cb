import { zookeeperStandaloneSetup } from '../support/store-setups';
import { runLockConformance } from './lock-conformance';

// A standalone ZooKeeper server of its own (java process, temp data dir).
runLockConformance({
  name: 'zookeeper (standalone)',
  setup: zookeeperStandaloneSetup,
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
