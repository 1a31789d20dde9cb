import { LockFixture } from '../conformance/battery/fixture';

/**
 * The app a core spec runs on: the memory backend, as `b`, behind a key prefix. What these
 * specs check is the engine's, whatever the store, so running it once is enough.
 */
export function memoryApp(): LockFixture {
  return new LockFixture({
    name: 'memory',
    setup: async () => ({ config: { type: 'memory' } }),
    capabilities: {
      leaseBased: true,
      fencing: true,
      waiting: 'queue',
      shared: true,
      permits: true,
    },
    shortTtl: 300,
  });
}
