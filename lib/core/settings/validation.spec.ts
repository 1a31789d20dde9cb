import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import {
  MAX_KEY_LENGTH,
  MAX_PERMITS,
  MIN_TTL_MS,
  validateKeys,
  validateLockOptions,
} from './validation';

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

  it('checks mode and permits, and refuses shared with more than one permit', () => {
    for (const mode of ['read', 'EXCLUSIVE', '', 1, null, true]) {
      expect(() => validateLockOptions({ mode })).toThrow(configError('mode'));
    }
    for (const permits of [0, -1, 1.5, NaN, Infinity, MAX_PERMITS + 1, '3', 3n, null]) {
      expect(() => validateLockOptions({ permits })).toThrow(configError('permits'));
    }
    expect(() => validateLockOptions({ mode: 'shared', permits: 2 })).toThrow(
      configError('permits'),
    );
    expect(validateLockOptions({ mode: 'shared' })).toMatchObject({ mode: 'shared' });
    expect(validateLockOptions({ mode: 'shared', permits: 1 })).toMatchObject({
      mode: 'shared',
      permits: 1,
    });
    expect(validateLockOptions({ permits: MAX_PERMITS })).toMatchObject({ permits: MAX_PERMITS });
    expect(validateLockOptions({ mode: 'exclusive', permits: 3 })).toMatchObject({
      mode: 'exclusive',
      permits: 3,
    });
    // Unset stays unset: the engine fills the defaults (exclusive, 1).
    const none = validateLockOptions({ ttl: 1_000 });
    expect(none.mode).toBeUndefined();
    expect(none.permits).toBeUndefined();
  });

  it('compares ttl with its minimum before rounding up', () => {
    expect(() => validateLockOptions({ ttl: MIN_TTL_MS - 0.5 })).toThrow(configError('ttl'));
    expect(validateLockOptions({ ttl: MIN_TTL_MS + 0.5 })).toMatchObject({ ttl: MIN_TTL_MS + 1 });
  });

  it('refuses a backend option that is no name before any message quotes it', () => {
    for (const backend of [1n, Symbol('b'), 1, null]) {
      expect(() => validateLockOptions({ backend })).toThrow(configError('backend'));
    }
  });

  it('turns a throwing getter, proxy or key list into a LockConfigError naming it', () => {
    const boom = () => {
      throw new Error('boom');
    };
    const getter = Object.defineProperty({}, 'ttl', { get: boom, enumerable: true });
    expect(() => validateLockOptions(getter)).toThrow(configError('options.ttl'));
    const inherited = Object.create(getter) as object;
    expect(() => validateLockOptions(inherited)).toThrow(configError('options.ttl'));
    expect(() => validateLockOptions(new Proxy({}, { ownKeys: boom }))).toThrow(
      configError('options'),
    );
    const signal = {
      get aborted(): boolean {
        return boom();
      },
      addEventListener() {},
      removeEventListener() {},
    };
    expect(() => validateLockOptions({ signal })).toThrow(configError('signal'));
    const keys = Object.defineProperty(['a', 'b'], 1, { get: boom });
    expect(() => validateKeys(keys)).toThrow(configError('key'));
    const { proxy, revoke } = Proxy.revocable([], {});
    revoke();
    expect(() => validateKeys(proxy)).toThrow(configError('key'));
  });
});
