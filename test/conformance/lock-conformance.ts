/**
 * The conformance battery: the store's side of the contract, written once and run unchanged
 * against every backend configuration (memory, redis, redis cluster, redlock, zookeeper, typeorm
 * table / for-update / advisory on postgres, mariadb, sqlite). A backend spec only describes its
 * target, including the capabilities its backend must declare:
 *
 * ```ts
 * runLockConformance({ name: 'memory', setup: async () => ({ config: { type: 'memory' } }),
 *   capabilities: { leaseBased: true, fencing: true, waiting: 'queue' }, shortTtl: 300 });
 * ```
 *
 * What lives where, and why:
 * - here (`battery/`, one file per concern): what a store could get wrong, so every backend
 *   runs it: exclusion, ttl expiry or session lifetime, renewal and extend, lockAtLeastFor,
 *   owner-only release, fences, try versus wait and the store's own queue, cancellation by the
 *   caller's signal, inspect/forceRelease where supported, multi-key rollback
 *   on the store, losing a lock, health, keys of any content, the declared capabilities, and
 *   shared and counted locks where declared (refused before any I/O where not).
 * - `test/core/*.spec.ts`, once, on the memory backend: what the engine does whatever the
 *   store: bad input refused before any I/O, event and metric payloads, scopes (`await using`,
 *   `current()`, `withLock`), reentrancy (which never calls the store), multi-key canonical
 *   order and de-duplication. Rerunning those per backend proved nothing more about a store.
 * - `lib/core/engine/*.spec.ts`, `lib/core/shared/timers.spec.ts`: the engine's parts alone
 *   (lease, handle, timers; acquisition with a backend that does not fence or returns a bad grant).
 *
 * "Another client" is played by a second, independent async context of the same app: a lock
 * taken with a bare `acquire()` is not entered into the async context, so two such calls contend
 * exactly like two processes would.
 */
import { describe } from '@jest/globals';
import { admin } from './battery/admin';
import { cancellation } from './battery/cancellation';
import { capabilities } from './battery/capabilities';
import { LockFixture, type ConcernName, type ConformanceTarget } from './battery/fixture';
import { fencing } from './battery/fencing';
import { health } from './battery/health';
import { keyContent } from './battery/key-content';
import { leaseLifetime } from './battery/lease-lifetime';
import { lostLock } from './battery/lost-lock';
import { multiKey } from './battery/multi-key';
import { mutualExclusion } from './battery/mutual-exclusion';
import { ownership } from './battery/ownership';
import { renewalBatching } from './battery/renewal-batching';
import { sharing } from './battery/sharing';
import { waiting } from './battery/waiting';
import { leadership } from './battery/leadership';

export type { ConformanceTarget } from './battery/fixture';

/** Every concern of the battery, by name, in the order they run. */
const CONCERNS: ReadonlyArray<[ConcernName, (fixture: LockFixture) => void]> = [
  ['capabilities', capabilities],
  ['mutualExclusion', mutualExclusion],
  ['leaseLifetime', leaseLifetime],
  ['ownership', ownership],
  ['fencing', fencing],
  ['waiting', waiting],
  ['cancellation', cancellation],
  ['multiKey', multiKey],
  ['lostLock', lostLock],
  ['renewalBatching', renewalBatching],
  ['health', health],
  ['keyContent', keyContent],
  ['admin', admin],
  ['sharing', sharing],
  ['leadership', leadership],
];

/** Declares `describe('conformance: <name>')` with every concern of the battery. */
export function runLockConformance(target: ConformanceTarget): void {
  describe(`conformance: ${target.name}`, () => {
    const fixture = new LockFixture(target);
    for (const [name, concern] of CONCERNS) {
      if (!target.concerns || target.concerns.includes(name)) concern(fixture);
    }
  });
}
