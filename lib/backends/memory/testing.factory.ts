import type { BackendFactory } from '../../core/contract/backend-factory';
import { checkOptions } from '../../core/shared/options';
import { TestingLockBackend } from './testing-backend';

const KEYS: ReadonlySet<string> = new Set(['type']);

/** `type: 'testing'`: the testing kit's in-memory store (`LockTestingModule` sets it up). */
export const testingBackendFactory: BackendFactory<{ type: 'testing' }> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a testing backend');
  },
  async create() {
    return new TestingLockBackend();
  },
};
