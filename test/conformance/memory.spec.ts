import { runLockConformance } from './lock-conformance';

runLockConformance({
  name: 'memory',
  setup: async () => ({ config: { type: 'memory' } }),
  fencing: true,
  leaseBased: true,
  shortTtl: 300,
});
