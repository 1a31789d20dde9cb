import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import { MAX_KEY_LENGTH, validateKeys, validateLockOptions } from './validation';

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
