import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { runLockConformance } from './lock-conformance';

// The machine's Redis (scripts/ensure-services.sh makes sure one answers on 6379); every run
// uses its own key prefix, so runs never see each other's keys.
runLockConformance({
  name: 'redis (single node)',
  setup: async () => ({
    config: { type: 'redis', url: MACHINE_REDIS_URL },
  }),
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
