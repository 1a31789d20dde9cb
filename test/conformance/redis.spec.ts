import { runLockConformance } from './lock-conformance';

// The machine's Redis (scripts/ensure-services.sh makes sure one answers on 6379); every run
// uses its own key prefix, so runs never see each other's keys.
runLockConformance({
  name: 'redis (single node)',
  setup: async () => ({
    config: { type: 'redis', url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
  }),
  capabilities: { leaseBased: true, fencing: true, waiting: 'queue' },
  shortTtl: 300,
  sharedAcrossApps: true,
});
