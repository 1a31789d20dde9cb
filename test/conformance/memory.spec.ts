import { runLockConformance } from './lock-conformance';

runLockConformance({
  name: 'memory',
  setup: async () => ({ config: { type: 'memory' } }),
  capabilities: { leaseBased: true, fencing: true, waiting: 'queue', shared: true, permits: true },
  batchedRenewal: true,
  shortTtl: 300,
  admin: true,
});
