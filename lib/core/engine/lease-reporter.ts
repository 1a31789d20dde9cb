import { LockError } from '../../errors/lock.errors';
import type { LockEvent, LockEventName } from '../../lock.interfaces';
import type { SecretRedactor } from '../contract/backend-factory';
import { monotonicNow } from '../shared/clock';
import type { HeldLeases } from './held-leases';
import type { Lease, LeaseHost } from './lease';
import type { LockEvents } from './lock-events';
import { toLockError } from './store-error';

/**
 * What happens to a lease, told to the rest of the engine: its end takes it off the held list;
 * its grant, release, renewal, loss and failures become events (and so metrics and logs), with
 * the configuration's secrets scrubbed from every reason and error.
 */
export class LeaseReporter implements LeaseHost {
  constructor(
    private readonly held: HeldLeases,
    private readonly events: LockEvents,
    /** Scrubs secrets from reasons and errors. */
    readonly redactor: SecretRedactor,
  ) {}

  leaseEnded(lease: Lease): void {
    this.held.delete(lease);
  }

  reportLost(lease: Lease, reason: string, cause?: unknown): void {
    this.emit('lost', lease, {
      heldMs: monotonicNow() - lease.acquiredAt,
      reason: this.redactor.text(reason),
      error: this.redactor.error(cause),
    });
  }

  reportRenewed(lease: Lease): void {
    this.emit('renewed', lease, {});
  }

  reportError(lease: Lease, reason: string, error: unknown): void {
    this.emit('error', lease, {
      reason: this.redactor.text(reason),
      // A LockError was built redacted; anything else is a store client's error object.
      error: error instanceof LockError ? error : this.redactor.error(error),
    });
  }

  storeError(lease: Lease, what: string, error: unknown): LockError {
    return toLockError(this.redactor, lease.info.backendName, what, error);
  }

  /** A grant after waiting `waitedMs`. */
  acquired(lease: Lease, waitedMs: number): void {
    if (this.events.listening('acquired')) this.emit('acquired', lease, { waitedMs });
    else this.events.countAcquired(lease.info.backendName, waitedMs);
  }

  /** A lease released by its last holder. */
  released(lease: Lease): void {
    const heldMs = monotonicNow() - lease.acquiredAt;
    if (this.events.listening('released')) this.emit('released', lease, { heldMs });
    else this.events.countEnded(lease.info.backendName, heldMs, false);
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
