import { describe, expect, it } from '@jest/globals';
import type { LockFixture } from './fixture';

/**
 * The backend declares what the target expects of it. The cases that depend on a capability
 * read it from the target, so this equality is what ties each declaration to the behaviour
 * checked: `leaseBased` (expiry of an unrenewed grant, or none), `fencing` (rising fences),
 * `waiting` (the store's own queue asked directly).
 */
export function capabilities(f: LockFixture): void {
  describe('capabilities', () => {
    it('declares the capabilities this target expects', () => {
      expect(f.backend.capabilities).toEqual(f.target.capabilities);
      // A queue the engine never asks would be a declaration at odds with the store.
      const { waiting } = f.backend.capabilities;
      expect(typeof f.backend.acquire).toBe(waiting === 'poll' ? 'undefined' : 'function');
      expect(typeof f.backend.extendMany).toBe(f.target.batchedRenewal ? 'function' : 'undefined');
      // A lease is trusted no longer than asked for, and for some time.
      for (const ttl of [f.ttl, 30_000]) {
        const validity = f.backend.leaseValidity?.(ttl) ?? ttl;
        expect(validity).toBeGreaterThan(0);
        expect(validity).toBeLessThanOrEqual(ttl);
      }
    });
  });
}
