import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import { resolveLockKey } from './key-template';

describe('resolveLockKey', () => {
  it('fills positional and nested placeholders', () => {
    expect(resolveLockKey('stock:{0}', ['sku-1'])).toBe('stock:sku-1');
    expect(resolveLockKey('o:{0.customer.id}/{1}', [{ customer: { id: 'c9' } }, 3])).toBe('o:c9/3');
    expect(resolveLockKey('n:{0}', [10n])).toBe('n:10');
    expect(resolveLockKey('plain', [])).toBe('plain');
  });

  it('refuses values that would collapse distinct calls onto one key', () => {
    for (const args of [[undefined], [null], [''], [{}], [NaN], [Infinity], [true], [[1, 2]]]) {
      expect(() => resolveLockKey('k:{0}', args)).toThrow(LockConfigError);
    }
    expect(() => resolveLockKey('k:{0.a.b}', [{ a: null }])).toThrow(
      /resolved to null|resolved to undefined/,
    );
    expect(() => resolveLockKey('k:{1}', ['only-one'])).toThrow(LockConfigError);
  });

  it('accepts key functions returning a string or an array of strings only', () => {
    expect(resolveLockKey((a: unknown) => `x:${String(a)}`, [1])).toBe('x:1');
    expect(resolveLockKey(() => ['a', 'b'], [])).toEqual(['a', 'b']);
    expect(() => resolveLockKey(() => undefined as unknown as string, [])).toThrow(LockConfigError);
    expect(() => resolveLockKey(() => ['a', 2] as unknown as string[], [])).toThrow(
      LockConfigError,
    );
  });
});
