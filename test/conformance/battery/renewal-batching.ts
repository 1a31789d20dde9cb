import { describe, expect } from '@jest/globals';
import type { GrantRequest } from '../../../lib/core/contract/lock-backend';
import { sleep } from '../../support/async';
import { type LockFixture, when } from './fixture';

/** The ttl of this case's locks, at least: a renewal may be late by 600 ms and keep its lock. */
const STALL_PROOF_TTL_MS = 900;

/**
 * Renewals go to the store in batches where the backend can take them (`extendMany`): the
 * engine's scheduler gathers the leases that are due, so many held locks cost a few store
 * calls per renewal period, not one per lock; and each lease is still renewed only while its
 * own token holds it (a lock taken from its holder is lost alone, the rest of the batch lives).
 */
export function renewalBatching(f: LockFixture): void {
  describe('batched renewal', () => {
    when(f.target.batchedRenewal === true)(
      'many held locks are renewed together, each only while it is ours',
      async () => {
        const extendMany = f.backend.extendMany!.bind(f.backend);
        const batches: GrantRequest[][] = [];
        f.backend.extendMany = (requests) => {
          batches.push([...requests]);
          return extendMany(requests);
        };
        try {
          const n = 40;
          const keys = Array.from({ length: n }, (_, i) => f.newKey(`batch-${i}`));
          const locks = [];
          // A renewal late by two thirds of the ttl loses its lock, as it should: the target's
          // shortest ttl (300 ms on Redis) lost one of 40 to a CI worker's 200 ms stall. Batching
          // does not depend on the ttl's size, so this case gives its locks a margin for that.
          const ttl = Math.max(f.ttl, STALL_PROOF_TTL_MS);
          const started = performance.now();
          for (const key of keys) locks.push(await f.acquire(key, { ttl }));
          const period = (f.backend.leaseValidity?.(ttl) ?? ttl) / 3;
          await sleep(period * 4);
          // Taken from one holder behind its back: that lease alone is lost at its next renewal.
          const victim = locks[n - 1];
          if (f.target.admin) {
            expect(await f.locks.forceRelease(keys[n - 1])).toBe(true);
            await sleep(period * 2.5);
            expect(victim.isHeld()).toBe(false);
            expect(victim.signal.aborted).toBe(true);
          } else {
            await sleep(period * 2.5);
          }
          const elapsed = performance.now() - started;
          const survivors = f.target.admin ? locks.slice(0, -1) : locks;
          for (const lock of survivors) {
            expect(lock.isHeld()).toBe(true);
            expect(lock.signal.aborted).toBe(false);
          }
          // One call per lock per period would be n × periods; a scheduler that batches sends at
          // most two per period (the cohort and a straggler), plus the first period's spread.
          const periods = elapsed / period;
          expect(batches.length).toBeLessThanOrEqual(Math.ceil(2 * periods) + 4);
          expect(Math.max(...batches.map((b) => b.length))).toBeGreaterThanOrEqual(
            survivors.length,
          );
          for (const batch of batches) {
            expect(new Set(batch.map((r) => r.token)).size).toBe(batch.length);
            for (const r of batch) expect(r.ttlMs).toBe(ttl);
          }
          for (const [i, lock] of survivors.entries()) await f.releaseFrees(lock, keys[i]);
        } finally {
          delete (f.backend as { extendMany?: unknown }).extendMany;
          if (!f.backend.extendMany) f.backend.extendMany = extendMany;
        }
      },
    );
  });
}
