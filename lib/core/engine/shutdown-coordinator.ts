import { setMaxListeners } from 'node:events';
import type { Logger } from '@nestjs/common';
import { unrefTimer } from '../shared/timers';
import type { HeldLeases } from './held-leases';
import type { Lease } from './lease';

/** Upper bound on releasing held locks at shutdown, so a dead store cannot hang the app's exit. */
const SHUTDOWN_RELEASE_TIMEOUT_MS = 5_000;

/** What shutdown does with locks held by running work (`LockModuleOptions.shutdown`). */
export interface ShutdownSettings {
  readonly inFlight: 'finish' | 'abort';
  /** With `'finish'`: longest wait for running work, ms. */
  readonly timeout: number;
}

/**
 * Everything shutdown needs, in one place: whether the engine is still open, the signal that
 * cancels every wait, and the releases still owed to stores (lockAtLeastFor on a session
 * store: released later, or at once when shutdown comes first).
 *
 * Shutdown runs in phases: refuse new acquisitions and cancel waits; with `inFlight:
 * 'finish'`, free locks no running work holds and wait (bounded) for the running work; then
 * release whatever is still held and send every owed release while the clients are open.
 */
export class ShutdownCoordinator {
  private readonly cancel = new AbortController();
  private closing = false;
  /** Owed releases not yet due, by their timer. */
  private readonly owed = new Map<NodeJS.Timeout, () => Promise<void>>();
  /** Owed releases running now (sent early because shutdown began). */
  private readonly sending = new Set<Promise<void>>();

  constructor(
    private readonly settings: ShutdownSettings,
    private readonly logger: Logger,
  ) {
    // Every waiting acquisition listens on this one signal; hundreds of waiters are normal.
    setMaxListeners(0, this.cancel.signal);
  }

  /** Aborted when shutdown begins: every wait listens on it. */
  get signal(): AbortSignal {
    return this.cancel.signal;
  }

  /** Whether shutdown has begun (no new acquisitions). */
  get isClosing(): boolean {
    return this.closing;
  }

  /**
   * Sends `release` after `delayMs`, or at once if shutdown has begun (the store is about to be
   * closed, and shutdown waits for it).
   */
  releaseLater(release: () => Promise<void>, delayMs: number): void {
    if (this.closing) {
      this.sendNow(release);
      return;
    }
    const timer = unrefTimer(() => {
      this.owed.delete(timer);
      void release();
    }, delayMs);
    this.owed.set(timer, release);
  }

  /**
   * Runs shutdown once (later calls return at once). `release(lease)` gives one held lease
   * back to its store (its signal aborts).
   */
  async shutdown(held: HeldLeases, release: (lease: Lease) => Promise<void>): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.cancel.abort();
    let freeing: Promise<void> | undefined;
    if (this.settings.inFlight === 'finish' && held.inFlight() > 0) {
      // Locks no running scope holds (bare acquire()) have nothing to wait for: free them now.
      freeing = this.bounded(held.outsideScopes().map(release));
      await this.waitForRunningWork(held);
    }
    // Owed releases go now, while the clients are open.
    for (const [timer, owed] of this.owed) {
      clearTimeout(timer);
      this.sendNow(owed);
    }
    this.owed.clear();
    await Promise.all([freeing, this.bounded(held.all().map(release))]);
    // Including the ones the releases above owed in turn (sent at once while closing).
    await this.bounded([...this.sending]);
  }

  /** With `'finish'`: waits up to the timeout for running work to end and release its locks. */
  private async waitForRunningWork(held: HeldLeases): Promise<void> {
    const ms = this.settings.timeout;
    this.logger.log(`waiting up to ${ms} ms for work holding ${held.inFlight()} lock(s) to finish`);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      held.whenIdle(),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
    ]);
    clearTimeout(timer);
    if (held.inFlight() > 0) {
      this.logger.warn(
        `work holding ${held.inFlight()} lock(s) still running after ${ms} ms of shutdown: releasing them (their signals abort)`,
      );
    }
  }

  private sendNow(release: () => Promise<void>): void {
    const sent = release().finally(() => this.sending.delete(sent));
    this.sending.add(sent);
  }

  /** Waits for `work`, at most SHUTDOWN_RELEASE_TIMEOUT_MS: a dead store cannot stall shutdown. */
  private async bounded(work: ReadonlyArray<Promise<void>>): Promise<void> {
    if (work.length === 0) return;
    this.logger.log(`releasing ${work.length} held lock(s) before shutdown`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), SHUTDOWN_RELEASE_TIMEOUT_MS);
    });
    const result = await Promise.race([Promise.allSettled(work), timeout]);
    clearTimeout(timer);
    if (result === 'timeout') {
      this.logger.warn(
        `some locks were not released within ${SHUTDOWN_RELEASE_TIMEOUT_MS} ms; they will expire by their ttl`,
      );
    }
  }
}
