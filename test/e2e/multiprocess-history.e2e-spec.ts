import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkHistory, HistoryRecorder, readHistory } from '../support/history';
import { createLockApp } from '../support/lock-app';
import { judgeLockWorkers } from '../support/worker-pool';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('multi-process history checking', () => {
  it('catches the violations of a known-unsafe setup: processes that each lock their own memory store', async () => {
    // Each process has its own in-process store, so nothing excludes them from each other:
    // the same harness that later judges real backends must report it.
    await judgeLockWorkers(
      {
        count: 3,
        optionsFor: () => ({ backends: { mem: { type: 'memory' } } }),
        key: 'shared',
        rounds: 8,
        holdMs: 20,
      },
      ({ final, result }) => {
        expect(result.criticalSections).toBe(24);
        const kinds = new Set(result.violations.map((v) => v.kind));
        expect(kinds.has('overlap')).toBe(true);
        expect(kinds.has('lost-update')).toBe(true);
        expect(final).toBeLessThan(24);
      },
    );
  }, 60_000);

  it('finds no violation when contenders share one store (in-process workers on the memory backend)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lock-history-'));
    const t = await createLockApp({ backends: { mem: { type: 'memory' } } });
    let witness = 0;
    try {
      const files = await Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          const file = join(dir, `w${w}.jsonl`);
          const rec = new HistoryRecorder(file, `w${w}`);
          for (let round = 0; round < 6; round++) {
            await t.locks.withLock('shared', async (lock) => {
              rec.acq('shared', lock.token, lock.fence);
              const read = witness;
              await sleep(Math.random() * 5);
              witness = read + 1;
              rec.witness('shared', lock.token, read, read + 1);
              rec.rel('shared', lock.token);
            });
          }
          rec.close();
          return file;
        }),
      );
      const result = checkHistory(readHistory(files), { witnessFinal: { shared: witness } });
      expect(result.violations).toEqual([]);
      expect(result.holds).toBe(24);
      expect(witness).toBe(24);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
