import type { LockEvent, LockEventName } from '../../lock.interfaces';
import { monotonicNow } from '../shared/clock';
import type { HeldLeases } from './held-leases';
import type { Lease, LeaseHost } from './lease';
import type { LockEvents } from './lock-events';

/**
 * What happens to a lease, told to the rest of the engine: its end takes it off the held list;
 * its grant, release, renewal, loss and failures become events (and so metrics and logs).
 */
export class LeaseReporter implements LeaseHost {
  constructor(
    private readonly held: HeldLeases,
    private readonly events: LockEvents,
  ) {}

  leaseEnded(lease: Lease): void {
    this.held.delete(lease);
  }

  reportLost(lease: Lease, reason: string, cause?: unknown): void {
    this.emit('lost', lease, { heldMs: monotonicNow() - lease.acquiredAt, reason, error: cause });
  }

  reportRenewed(lease: Lease): void {
    this.emit('renewed', lease, {});
  }

  reportError(lease: Lease, reason: string, error: unknown): void {
    this.emit('error', lease, { reason, error });
  }

  /** A grant after waiting `waitedMs`. */
  acquired(lease: Lease, waitedMs: number): void {
    this.emit('acquired', lease, { waitedMs });
  }

  /** A lease released by its last holder. */
  released(lease: Lease): void {
    this.emit('released', lease, { heldMs: monotonicNow() - lease.acquiredAt });
  }

  private emit(type: LockEventName, lease: Lease, extra: Partial<LockEvent>): void {
    this.events.emit({
      type,
      key: lease.info.key,
      backend: lease.info.backendName,
      token: lease.info.token,
      fence: lease.info.fence,
      ...extra,
    });
  }
}
