import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import {
  checkDuration,
  checkExactlyOne,
  checkOptions,
  checkWait,
  copyOwnOptions,
  describe as describeValue,
} from './options';

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(LockConfigError);
    return (err as LockConfigError).field;
  }
  throw new Error('expected a LockConfigError');
}

describe('option checks', () => {
  it('rejects ttl <= 0, NaN, Infinity and non-numbers; rounds fractional ms up', () => {
    for (const v of [0, -1, NaN, Infinity, '10', null])
      expect(fieldOf(() => checkDuration(v, 'ttl'))).toBe('ttl');
    expect(checkDuration(0.2, 'ttl')).toBe(1);
  });

  it('accepts 0 and Infinity waits, rejects negative and NaN', () => {
    expect(checkWait(0, 'waitTimeout')).toBe(0);
    expect(checkWait(Infinity, 'waitTimeout')).toBe(Infinity);
    for (const v of [-1, NaN, '1'])
      expect(fieldOf(() => checkWait(v, 'waitTimeout'))).toBe('waitTimeout');
  });

  it('refuses unknown keys, naming them under the given prefix', () => {
    const known = new Set(['url', 'type']);
    expect(checkOptions({ type: 'redis', url: 'x' }, known, 'backends.main')).toEqual({
      type: 'redis',
      url: 'x',
    });
    expect(fieldOf(() => checkOptions({ urll: 'x' }, known, 'backends.main'))).toBe(
      'backends.main.urll',
    );
    expect(fieldOf(() => checkOptions({ urll: 'x' }, known, 'options', ''))).toBe('urll');
    expect(fieldOf(() => checkOptions('x', known, 'backends.main'))).toBe('backends.main');
  });

  it('asks for exactly one of several alternatives', () => {
    expect(checkExactlyOne({ url: 'u' }, ['url', 'client'], 'f')).toBe('url');
    expect(fieldOf(() => checkExactlyOne({}, ['url', 'client'], 'f'))).toBe('f');
    expect(fieldOf(() => checkExactlyOne({ url: 1, client: 2 }, ['url', 'client'], 'f'))).toBe('f');
  });

  it('reads each known option once; a read that throws is a refusal naming the option', () => {
    let reads = 0;
    const counted = Object.defineProperty({}, 'url', {
      get: () => `u${++reads}`,
      enumerable: true,
    });
    expect(checkOptions(counted, new Set(['url']), 'b')).toEqual({ url: 'u1' });
    expect(reads).toBe(1);
    const throwing = Object.defineProperty({}, 'url', {
      get() {
        throw new Error('secret in a message');
      },
      enumerable: true,
    });
    expect(fieldOf(() => checkOptions(throwing, new Set(['url']), 'b'))).toBe('b.url');
    expect(() => checkOptions(throwing, new Set(['url']), 'b')).not.toThrow(/secret/);
  });

  it('copies own options without running into __proto__, getters or proxies', () => {
    const parsed = JSON.parse('{"ttl": 1000, "__proto__": {"ttl": 5}}') as unknown;
    expect(fieldOf(() => copyOwnOptions(parsed, 'options'))).toBe('options.__proto__');
    expect(copyOwnOptions(Object.create({ ttl: 5 }) as unknown, 'options')).toEqual({});
    const getter = Object.defineProperty({}, 'ttl', {
      get() {
        throw new Error('boom');
      },
      enumerable: true,
    });
    expect(fieldOf(() => copyOwnOptions(getter, 'options', ''))).toBe('ttl');
    expect(fieldOf(() => copyOwnOptions(null, 'options'))).toBe('options');
  });

  it('describes any value without throwing', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(describeValue(proxy)).toBe('object');
    expect(describeValue(1n)).toBe('bigint 1');
    expect(describeValue(Symbol('s'))).toBe('symbol');
  });
});
