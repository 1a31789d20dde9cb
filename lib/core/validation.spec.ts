import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../errors/lock.errors';
import {
  MAX_KEY_LENGTH,
  validateKeys,
  validateLockOptions,
  validateTtl,
  validateWait,
} from './validation';

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(LockConfigError);
    return (err as LockConfigError).field;
  }
  throw new Error('expected a LockConfigError');
}

describe('validation', () => {
  it('rejects bad keys, naming the field', () => {
    expect(fieldOf(() => validateKeys(''))).toBe('key');
    expect(fieldOf(() => validateKeys('x'.repeat(MAX_KEY_LENGTH + 1)))).toBe('key');
    expect(fieldOf(() => validateKeys(5))).toBe('key');
    expect(fieldOf(() => validateKeys([]))).toBe('key');
    expect(fieldOf(() => validateKeys(['a', '']))).toBe('key[1]');
    expect(fieldOf(() => validateKeys(Array.from({ length: 65 }, (_, i) => `k${i}`)))).toBe('key');
  });

  it('accepts the longest allowed key and de-duplicates key lists', () => {
    expect(validateKeys('x'.repeat(MAX_KEY_LENGTH))).toHaveLength(1);
    expect(validateKeys(['a', 'b', 'a'])).toEqual(['a', 'b']);
  });

  it('rejects ttl <= 0, NaN, Infinity and non-numbers; rounds fractional ms up', () => {
    for (const v of [0, -1, NaN, Infinity, '10', null])
      expect(fieldOf(() => validateTtl(v, 'ttl'))).toBe('ttl');
    expect(validateTtl(0.2, 'ttl')).toBe(1);
  });

  it('accepts 0 and Infinity waits, rejects negative and NaN', () => {
    expect(validateWait(0, 'waitTimeout')).toBe(0);
    expect(validateWait(Infinity, 'waitTimeout')).toBe(Infinity);
    for (const v of [-1, NaN, '1'])
      expect(fieldOf(() => validateWait(v, 'waitTimeout'))).toBe('waitTimeout');
  });

  it('rejects unknown and mistyped lock options', () => {
    expect(fieldOf(() => validateLockOptions({ timeout: 5 }))).toBe('options.timeout');
    expect(fieldOf(() => validateLockOptions({ autoRenew: 'yes' }))).toBe('autoRenew');
    expect(fieldOf(() => validateLockOptions({ lockAtLeastFor: -1 }))).toBe('lockAtLeastFor');
    expect(fieldOf(() => validateLockOptions({ lockAtLeastFor: Infinity }))).toBe('lockAtLeastFor');
    expect(fieldOf(() => validateLockOptions('fast'))).toBe('options');
    expect(validateLockOptions({ ttl: 100, waitTimeout: 0 })).toMatchObject({
      ttl: 100,
      waitTimeout: 0,
    });
  });
});
