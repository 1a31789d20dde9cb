import { describe, expect, it } from '@jest/globals';
import { bucketOfStoredKey } from './fence-layout';
import {
  holderIndex,
  holderRow,
  holderRows,
  markerOf,
  markerOwner,
  writerMark,
} from './holder-rows';
import { SqlDialect, storedKey } from './sql-dialect';

describe('holder rows of shared and counted table locks', () => {
  const stored = storedKey('prices');

  it('are never a key digest nor a reserved row, fit the column, and stay in the key bucket', () => {
    const rows = [...holderRows(stored, { mode: 'exclusive', count: 1024 }), writerMark(stored)];
    rows.push(...holderRows(stored, { mode: 'shared', count: 100_000 }).slice(-1));
    expect(new Set(rows).size).toBe(rows.length);
    for (const row of rows) {
      expect(row).not.toMatch(/^[0-9a-f]{64}$/);
      expect(row).not.toMatch(/^~/);
      expect(row.length).toBeLessThanOrEqual(64);
      expect(bucketOfStoredKey(row, 4_096)).toBe(bucketOfStoredKey(stored, 4_096));
      // In binary order after the key's row (and after any digest sharing its first 56 digits).
      expect(row > stored).toBe(true);
      expect(row > `${stored.slice(0, 56)}ffffffff`).toBe(true);
    }
    expect(holderRow(stored, 'exclusive', 7)).not.toBe(holderRow(stored, 'shared', 7));
    expect(holderIndex(holderRow(stored, 'exclusive', 1023))).toBe(1023);
    expect(holderIndex(holderRow(stored, 'shared', 42))).toBe(42);
  });

  it("the key row's marker reads back on every dialect, and no token reads as one", () => {
    for (const family of ['postgres', 'mysql', 'sqlite'] as const) {
      const dialect = new SqlDialect(family);
      for (const marker of [
        { mode: 'shared', count: 3 },
        { mode: 'exclusive', count: 1024 },
      ] as const) {
        const owner = markerOwner(dialect, marker);
        expect(owner.length).toBeLessThanOrEqual(64);
        expect(markerOf(owner)).toEqual(marker);
      }
      expect(markerOf(dialect.owner('0123456789abcdef0123456789abcdef'))).toBeUndefined();
    }
    expect(markerOf(null)).toBeUndefined();
  });
});
