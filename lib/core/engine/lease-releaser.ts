import { messageOf } from '../shared/error-message';
import type { Lease } from './lease';
import type { LeaseReporter } from './lease-reporter';
import type { HandleHost } from './lock-handle';
import type { ShutdownCoordinator } from './shutdown-coordinator';

/**
 * Gives leases back: each handle released drops one holder of each of its leases, and the last
 * holder really releases. `lockAtLeastFor` is honoured here: a lease store keeps the lock until
 * then by itself; a session store is released later, through the shutdown coordinator (which
 * sends it early if the application shuts down first).
 */
export class LeaseReleaser implements HandleHost {
  constructor(
    private readonly reporter: LeaseReporter,
    private readonly shutdown: ShutdownCoordinator,
  ) {}

  /**
   * Drops one holder from each lease (in the given order); the last holder really releases.
   * `keep: false` (a failed acquisition giving back what it took) ignores `lockAtLeastFor`.
   */
  async releaseLeases(leases: readonly Lease[], keep = true): Promise<void> {
    let firstError: unknown;
    for (const lease of leases) {
      lease.holders--;
      if (lease.holders > 0 || lease.state !== 'held') continue;
      try {
        this.finished(lease, await lease.finish('released', keep));
      } catch (err) {
        const error = this.reporter.storeError(
          lease,
          `release failed for "${lease.info.key}"`,
          err,
        );
        this.reporter.reportError(lease, error.message, error);
        firstError ??= error;
      }
    }
    if (firstError !== undefined) throw firstError;
  }

  /** Releases `lease` whatever its holder count (shutdown); its signal aborts. */
  releaseNow(lease: Lease): Promise<void> {
    lease.holders = 1;
    return this.releaseLeases([lease]);
  }

  /** Reports how a lease's release ended (a sync step: no extra await on every release). */
  private finished(lease: Lease, result: Awaited<ReturnType<Lease['finish']>>): void {
    if (result.outcome === 'lost') {
      if ((lease.state as Lease['state']) === 'released') {
        // The store no longer had our token although our lease had not run out: a loss the
        // watchdog could not see (store restarted empty, key deleted by hand). Report it.
        this.reporter.reportLost(lease, 'the lock was found taken or expired at release');
      }
      return;
    }
    if (result.outcome === 'deferred') {
      const { backend, fullKey, token } = lease.info;
      this.shutdown.releaseLater(
        () =>
          backend.release(fullKey, token, lease.info).then(
            () => undefined,
            (err: unknown) =>
              this.reporter.reportError(lease, `deferred release failed: ${messageOf(err)}`, err),
          ),
        result.keepForMs,
      );
    }
    this.reporter.released(lease);
  }
}
