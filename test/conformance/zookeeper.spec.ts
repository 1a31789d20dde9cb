import { startZkStandalone } from '../../servers/zk-servers';
import { runLockConformance } from './lock-conformance';

// A standalone ZooKeeper server of its own (java process, temp data dir).
runLockConformance({
  name: 'zookeeper (standalone)',
  setup: async () => {
    const zk = await startZkStandalone();
    return {
      config: { type: 'zookeeper', connectionString: zk.connectString, sessionTimeout: 4_000 },
      teardown: () => zk.destroy(),
    };
  },
  capabilities: { leaseBased: false, fencing: true, waiting: 'queue-first' },
  shortTtl: 600,
  sharedAcrossApps: true,
  admin: true,
});
