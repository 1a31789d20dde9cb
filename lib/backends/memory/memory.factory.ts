import type { BackendFactory } from '../../core/contract/backend-factory';
import { checkOptions } from '../../core/shared/options';
import type { MemoryBackendConfig } from '../backend-config';
import { MemoryLockBackend } from './memory.backend';

const KEYS: ReadonlySet<string> = new Set(['type']);

/** `type: 'memory'`: no options, no packages. */
export const memoryBackendFactory: BackendFactory<MemoryBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a memory backend');
  },
  async create() {
    return new MemoryLockBackend();
  },
};
