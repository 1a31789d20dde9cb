import { describe, expect, it } from '@jest/globals';
import { LockConfigError } from '../../errors/lock.errors';
import type { TypeormBackendConfig } from '../backend-config';
import {
  bucketIndexOf,
  bucketKey,
  bucketOfStoredKey,
  bucketsOfMetaText,
  FenceLayout,
  KEY_ROW,
  MAX_FENCE_BUCKETS,
} from './fence-layout';
import { storedKey } from './sql-dialect';
import { sqlBackendFactory } from './sql.factory';

describe('fence layout', () => {
  it('maps a key to a bucket from the first 32 bits of its stored key', () => {
    const layout = new FenceLayout(16);
    const stored = storedKey('some key');
    expect(layout.bucketOf('some key')).toBe(Number.parseInt(stored.slice(0, 8), 16) % 16);
    expect(bucketOfStoredKey('ffffffff' + '0'.repeat(56), 4_096)).toBe(0xffffffff % 4_096);
    for (let i = 0; i < 200; i++) {
      const bucket = layout.bucketOf(`k${i}`);
      expect(bucket).toBeGreaterThanOrEqual(0);
      expect(bucket).toBeLessThan(16);
    }
  });

  it('reserved stored keys can never be a key digest, and read back padded or not', () => {
    expect(bucketKey(7)).toMatch(/^~/);
    expect(storedKey('~fence:meta')).toMatch(/^[0-9a-f]{64}$/);
    expect(KEY_ROW).toContain("NOT LIKE '~%'");
    expect(bucketIndexOf(`${bucketKey(4_095)}      `)).toBe(4_095);
    expect(bucketIndexOf(storedKey('x'))).toBeUndefined();
    expect(bucketsOfMetaText(new FenceLayout(64).metaText)).toBe(64);
    expect(bucketsOfMetaText('fence of x')).toBeUndefined();
  });

  it('fenceBuckets must be a whole number from 1 to the maximum: LockConfigError names the field', () => {
    const config = (fenceBuckets: unknown): TypeormBackendConfig & Record<string, unknown> =>
      ({
        type: 'typeorm',
        dataSourceOptions: { type: 'postgres' },
        fenceBuckets,
      }) as TypeormBackendConfig & Record<string, unknown>;
    for (const good of [1, 16, 4_096, MAX_FENCE_BUCKETS]) {
      expect(() => sqlBackendFactory.validate(config(good), 'backends.db')).not.toThrow();
    }
    for (const bad of [0, -1, 1.5, MAX_FENCE_BUCKETS + 1, '16', NaN, Infinity, null]) {
      let error: unknown;
      try {
        sqlBackendFactory.validate(config(bad), 'backends.db');
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(LockConfigError);
      expect((error as LockConfigError).message).toContain('backends.db.fenceBuckets');
    }
  });
});
