import { startRedisNodes } from '../../servers/redis-servers';
import { runLockConformance } from './lock-conformance';

// Redlock over three independent redis-server processes of its own.
runLockConformance({
  name: 'redlock (3 nodes)',
  setup: async () => {
    const nodes = await startRedisNodes(3);
    return {
      config: { type: 'redlock', urls: nodes.map((n) => n.url) },
      teardown: async () => {
        await Promise.all(nodes.map((n) => n.stop()));
      },
    };
  },
  capabilities: { leaseBased: true, fencing: true, waiting: 'poll' },
  shortTtl: 300,
  sharedAcrossApps: true,
  admin: true,
});
