import { FULL_SCALE } from './key-inputs';
import { runInputProperties } from './input-properties';

// The memory backend: many inputs per property (each takes well under a millisecond).
runInputProperties({
  name: 'memory',
  setup: async () => ({ config: { type: 'memory' } }),
  runs: 3_000,
  scale: FULL_SCALE,
  callMs: 5_000,
  decoratorOptions: true,
});
