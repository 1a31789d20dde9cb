import { redlockSetup } from '../support/store-setups';
import { runLockConformance } from './lock-conformance';

// Redlock over three independent redis-server processes of its own.
runLockConformance({
  name: 'redlock (3 nodes)',
  setup: redlockSetup,
  capabilities: { leaseBased: true, fencing: true, waiting: 'poll', shared: false, permits: false },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
  batchedRenewal: true,
});
