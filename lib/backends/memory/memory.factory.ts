import { LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../backend-factory';
import type { MemoryBackendConfig } from '../backend-config';
import { MemoryLockBackend } from './memory.backend';

/** `type: 'memory'`: no options, no packages. */
export const memoryBackendFactory: BackendFactory<MemoryBackendConfig> = {
  validate(config, field) {
    for (const name of Object.keys(config)) {
      if (name !== 'type')
        throw new LockConfigError(`${field}.${name}`, 'unknown option for a memory backend');
    }
  },
  async create() {
    return new MemoryLockBackend();
  },
};
