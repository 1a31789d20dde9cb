import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { storedKey } from '../../lib/backends/sql/sql-dialect';
import { tempSqliteFile, uniqueTableName } from '../../servers/databases';
import { createLockApp } from '../support/lock-app';

/** The slice of better-sqlite3 this test uses (the package ships no types). */
interface RawSqlite {
  prepare(sql: string): { get(...params: unknown[]): unknown; run(...params: unknown[]): unknown };
  close(): void;
}
const Database = createRequire(join(process.cwd(), 'package.json'))('better-sqlite3') as new (
  file: string,
) => RawSqlite;

const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();

describe('sqlite table leases run on the machine monotonic clock', () => {
  it('stores expiries on CLOCK_MONOTONIC with the boot id, and takes over rows of an earlier boot', async () => {
    const sqlite = tempSqliteFile();
    const tableName = uniqueTableName('clock');
    const options = {
      backends: {
        db: {
          type: 'typeorm' as const,
          dataSourceOptions: { type: 'better-sqlite3', database: sqlite.file },
          tableName,
          createTable: true,
        },
      },
    };
    const a = await createLockApp(options);
    const b = await createLockApp(options);
    const raw = new Database(sqlite.file);
    try {
      const held = await a.locks.acquire('k', { ttl: 60_000 });
      const row = raw
        .prepare(`SELECT owner, expires_at FROM "${tableName}" WHERE lock_key = ?`)
        .get(storedKey('k')) as { owner: string; expires_at: number };
      const monotonicMs = Number(process.hrtime.bigint() / 1_000_000n);
      // Not epoch milliseconds: a wall clock step can no longer expire it early.
      expect(row.expires_at).toBeGreaterThan(monotonicMs + 55_000);
      expect(row.expires_at).toBeLessThanOrEqual(monotonicMs + 60_000);
      expect(row.owner).toBe(`${bootId}/${held.token}`);
      expect(await b.locks.tryAcquire('k')).toBeNull();

      // The same row as an earlier boot would have left it: its holder is dead, the expiry is
      // on a clock that started over. It must be free, though its expiry looks far ahead.
      raw
        .prepare(`UPDATE "${tableName}" SET owner = ?, expires_at = ? WHERE lock_key = ?`)
        .run(
          `00000000-0000-0000-0000-000000000000/${held.token}`,
          monotonicMs * 10,
          storedKey('k'),
        );
      expect(await b.locks.isLocked('k')).toBe(false);
      const taken = await b.locks.tryAcquire('k');
      expect(taken).not.toBeNull();
      expect(taken!.fence).toBeGreaterThan(held.fence!);
      await taken!.release();
    } finally {
      raw.close();
      await a.close();
      await b.close();
      sqlite.cleanup();
    }
  });
});
