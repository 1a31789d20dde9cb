import { describe, expect, it } from '@jest/globals';
import { LeaderService } from '../../../lib/leader/leader.service';
import { within } from '../../support/async';
import type { LockTestApp } from '../../support/lock-app';
import { QUICK_MS, type LockFixture } from './fixture';

/** A leadership lease every backend can renew (a leadership needs a second of validity). */
const LEADER_TTL_MS = 3_000;

/**
 * Leader election on the backend: one candidate leads under a term that is the lock's fence;
 * another (in a second app where the store is shared, else a second campaign here) waits and
 * leads within a second of a resign, under a higher term; `leader()` from the other names the
 * leader (its id, value and term) while it leads, and nobody once the last one resigned.
 */
export function leadership(f: LockFixture): void {
  describe('leadership', () => {
    it('one leads; the next leads within a second of a resign, under a higher term', async () => {
      const name = f.newKey('lead');
      let second: LockTestApp | undefined;
      try {
        const here = f.leaders();
        if (f.target.sharedAcrossApps) second = await f.newApp();
        const there = second ? second.app.get(LeaderService) : here;
        const first = await here.campaign(name, { ttl: LEADER_TTL_MS, value: 'first' });
        expect(first.isLeader()).toBe(true);
        expect(first.term).toBeGreaterThan(0);

        let nextLeads = false;
        const waiting = there.campaign(name, { ttl: LEADER_TTL_MS });
        // Settled either way before the apps close (a failed check must not leave it unhandled).
        waiting.then(
          () => (nextLeads = true),
          () => undefined,
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(nextLeads).toBe(false);
        expect(await there.leader(name)).toEqual({
          id: here.id,
          value: 'first',
          term: first.term,
        });

        await first.resign();
        const next = await within(waiting, QUICK_MS, 'the next candidate to lead');
        expect(first.isLeader()).toBe(false);
        expect(first.signal.aborted).toBe(true);
        expect(next.isLeader()).toBe(true);
        expect(next.term).toBeGreaterThan(first.term);
        await next.resign();
        expect(await here.leader(name)).toBeNull();
      } finally {
        await second?.close();
      }
    });
  });
}
