import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import { MAX_KEY_LENGTH, validateKeys, validateLockOptions } from './validation';

/** What a thrown `LockConfigError` naming `field` matches. */
const configError = (field: string) =>
  expect.objectContaining({ constructor: LockConfigError, code: 'LOCK_CONFIG', field });

describe('validation', () => {
  it('rejects bad keys, naming the field', () => {
    expect(() => validateKeys('')).toThrow(configError('key'));
    expect(() => validateKeys('x'.repeat(MAX_KEY_LENGTH + 1))).toThrow(configError('key'));
    expect(() => validateKeys(5)).toThrow(configError('key'));
    expect(() => validateKeys([])).toThrow(configError('key'));
    expect(() => validateKeys(['a', ''])).toThrow(configError('key[1]'));
    expect(() => validateKeys(Array.from({ length: 65 }, (_, i) => `k${i}`))).toThrow(
      configError('key'),
    );
  });

  it('accepts the longest allowed key and de-duplicates key lists', () => {
    expect(validateKeys('x'.repeat(MAX_KEY_LENGTH))).toHaveLength(1);
    expect(validateKeys(['a', 'b', 'a'])).toEqual(['a', 'b']);
  });

  it('rejects unknown and mistyped lock options', () => {
    expect(() => validateLockOptions({ timeout: 5 })).toThrow(configError('options.timeout'));
    expect(() => validateLockOptions({ autoRenew: 'yes' })).toThrow(configError('autoRenew'));
    expect(() => validateLockOptions({ lockAtLeastFor: -1 })).toThrow(
      configError('lockAtLeastFor'),
    );
    expect(() => validateLockOptions({ lockAtLeastFor: Infinity })).toThrow(
      configError('lockAtLeastFor'),
    );
    expect(() => validateLockOptions('fast')).toThrow(configError('options'));
    expect(validateLockOptions({ ttl: 100, waitTimeout: 0 })).toMatchObject({
      ttl: 100,
      waitTimeout: 0,
    });
  });
});
