import {
  LockAbortedError,
  LockBackendError,
  LockConfigError,
  LockLostError,
  LockNotAcquiredError,
  LockShuttingDownError,
} from '../../errors/lock.errors';
import type { SecretRedactor } from '../contract/backend-factory';
import type { LockBackend, LockGrant } from '../contract/lock-backend';
import { monotonicNow } from '../shared/clock';
import { backoffDelay, sleep, withTimeout } from '../shared/timers';
import { newOwnerToken } from '../shared/token';
import type { HeldLeases } from './held-leases';
import { Lease } from './lease';
import type { LeaseReleaser } from './lease-releaser';
import type { LeaseReporter } from './lease-reporter';
import type { LockContext } from './lock-context';
import type { LockEvents } from './lock-events';
import { LockHandle } from './lock-handle';
import type { LockRequest } from './lock-request';
import type { RenewalSchedulers } from './renewal-scheduler';
import type { ShutdownCoordinator } from './shutdown-coordinator';
import { toLockError } from './store-error';

/** What an acquisition needs from the rest of the engine. */
export interface AcquisitionDeps {
  readonly context: LockContext;
  readonly held: HeldLeases;
  readonly events: LockEvents;
  readonly reporter: LeaseReporter;
  readonly releaser: LeaseReleaser;
  readonly shutdown: ShutdownCoordinator;
  /** Bound on any single store call, ms. */
  readonly operationTimeout: number;
  /** Scrubs secrets from store errors. */
  readonly redactor: SecretRedactor;
  /** Keeps the time of held leases and renews them, per backend. */
  readonly renewals: RenewalSchedulers;
}

/**
 * The acquisition loop, written once for every backend: re-entry of keys the caller's scope
 * already holds, then per key (in canonical order, all or none) a try, and while there is time
 * left a wait, in the store's queue or by polling with backoff, as the backend's
 * `capabilities.waiting` says. A grant becomes a {@link Lease}; the keys become one
 * {@link LockHandle}.
 */
export class Acquisition {
  constructor(private readonly deps: AcquisitionDeps) {}

  /**
   * Acquires every key of `req` (all or none). `'try'` resolves `null` when a key is busy;
   * `'wait'` rejects `LockNotAcquiredError` when `waitTimeout` runs out.
   */
  async run(req: LockRequest, mode: 'try' | 'wait'): Promise<LockHandle | null> {
    const { context, shutdown, events } = this.deps;
    // Shutting down: no new locks, but work still running may re-enter the ones it holds.
    if (shutdown.isClosing && !req.keys.every(([, full]) => this.reentrant(req, full))) {
      throw new LockShuttingDownError(req.backendName, 'no new acquisitions');
    }
    if (req.signal?.aborted) {
      throw new LockAbortedError(req.keys[0][0], req.backendName, req.signal.reason);
    }
    // A re-entry the scope cannot grant is refused before any key is taken (one key: the loop
    // below finds it before its first store call anyway).
    if (req.keys.length > 1) {
      for (const [key, fullKey] of req.keys) {
        const outer = context.find(req.backendName, fullKey);
        if (outer && outer.state !== 'released') checkReentry(req, key, outer);
      }
    }
    const startedAt = monotonicNow();
    const token = req.label === undefined ? newOwnerToken() : `${newOwnerToken()}.${req.label}`;
    const leases: Lease[] = [];
    try {
      for (const [key, fullKey] of req.keys) {
        const outer = context.find(req.backendName, fullKey);
        if (outer && outer.state !== 'released') {
          checkReentry(req, key, outer);
          if (!outer.isHeld()) {
            throw new LockLostError(
              key,
              req.backendName,
              'the enclosing lock being re-entered was lost',
            );
          }
          outer.holders++;
          leases.push(outer);
          events.reentered(req.backendName);
          continue;
        }
        const waitMs =
          req.waitTimeout === Infinity
            ? Infinity
            : Math.max(0, startedAt + req.waitTimeout - monotonicNow());
        const lease = await this.acquireKey(req, key, fullKey, token, waitMs, startedAt);
        if (!lease)
          throw new LockNotAcquiredError(key, req.backendName, monotonicNow() - startedAt);
        leases.push(lease);
      }
    } catch (err) {
      // All or none: give back what this call took (or re-entered) before failing, at once:
      // lockAtLeastFor keeps a lock its work ran under, and none ran under these.
      await this.deps.releaser.releaseLeases(leases.reverse(), false).catch(() => undefined);
      if (mode === 'try' && err instanceof LockNotAcquiredError) return null;
      throw err;
    }
    return new LockHandle(this.deps.releaser, leases, req.backendName);
  }

  /** Why a wait stopped early: the caller's signal, else shutdown. */
  private stopped(req: LockRequest, key: string): Error {
    if (req.signal?.aborted) return new LockAbortedError(key, req.backendName, req.signal.reason);
    return new LockShuttingDownError(req.backendName, 'wait cancelled');
  }

  /** Whether the caller's scope holds `fullKey` (so shutdown still lets it re-enter). */
  private reentrant(req: LockRequest, fullKey: string): boolean {
    const outer = this.deps.context.find(req.backendName, fullKey);
    return outer !== undefined && outer.state !== 'released';
  }

  /** One key: try, then wait (queued or with backoff) until granted or out of time. */
  private async acquireKey(
    req: LockRequest,
    key: string,
    fullKey: string,
    token: string,
    waitMs: number,
    startedAt: number,
  ): Promise<Lease | null> {
    const { backend, backendName } = req;
    const { events, shutdown } = this.deps;
    // Waits end on shutdown, and on the caller's signal if there is one.
    const signal = req.signal ? AbortSignal.any([shutdown.signal, req.signal]) : shutdown.signal;
    const stopped = (): Error => this.stopped(req, key);
    const waitDeadline = monotonicNow() + waitMs;
    events.attempt(backendName);
    let contended = false;
    const onQueued = (): void => {
      if (contended) return;
      contended = true;
      events.emit({
        type: 'contended',
        key,
        backend: backendName,
        token,
        waitedMs: monotonicNow() - startedAt,
      });
    };
    const grantRequest = {
      key: fullKey,
      token,
      ttlMs: req.ttl,
      mode: req.mode,
      permits: req.permits,
    };
    const { waiting } = backend.capabilities;
    const tryFirst = waiting !== 'queue-first' || waitMs <= 0;
    for (let attempt = 0; ; attempt++) {
      if (tryFirst) {
        const sentAt = monotonicNow();
        const grant = await this.bounded(
          req,
          key,
          fullKey,
          token,
          backend.tryAcquire(grantRequest),
        );
        const lease = grant && this.toLease(req, key, fullKey, token, grant, sentAt, startedAt);
        if (lease) return lease;
        onQueued();
      }
      const remaining = waitDeadline - monotonicNow();
      if (remaining <= 0) break;
      if (signal.aborted) throw stopped();
      if (waiting !== 'poll') {
        const sentAt = monotonicNow();
        const queued = await this.bounded(
          req,
          key,
          fullKey,
          token,
          // Written out, not `{ ...grantRequest, ... }`: the spread cost about 4 µs a call, which
          // is every acquisition on a 'queue-first' backend.
          backend.acquire!({
            key: fullKey,
            token,
            ttlMs: req.ttl,
            mode: req.mode,
            permits: req.permits,
            waitMs: remaining,
            signal,
            onQueued,
          }),
          remaining + this.deps.operationTimeout,
        );
        if (signal.aborted && !queued) throw stopped();
        const lease = queued && this.toLease(req, key, fullKey, token, queued, sentAt, startedAt);
        if (lease) return lease;
        break;
      }
      await sleep(Math.min(remaining, backoffDelay(attempt)), signal);
      if (signal.aborted) throw stopped();
    }
    events.notAcquired(backendName, monotonicNow() - startedAt);
    return null;
  }

  /** Turns a grant into a live lease, or refuses one that is already worthless. */
  private toLease(
    req: LockRequest,
    key: string,
    fullKey: string,
    token: string,
    grant: LockGrant,
    sentAt: number,
    startedAt: number,
  ): Lease | null {
    const { backend, backendName } = req;
    let fence: number | null;
    let permit: number;
    try {
      fence = fenceOf(backend, backendName, grant);
      permit = permitOf(backendName, grant, req.permits);
    } catch (err) {
      backend.release(fullKey, token, req).catch(() => undefined);
      throw err;
    }
    const from = grant.grantedAt ?? sentAt;
    const full = Lease.validityOf(backend, req.ttl);
    // A shorter store lease (a hand-over) is all we trust until it is extended to the ttl.
    const short = grant.validityMs !== undefined && grant.validityMs < full;
    const validity = short ? grant.validityMs! : full;
    // Granted, but the lease already ran out on the way back (slow store, long pause), or the
    // module began shutting down meanwhile: give it back instead of leaking it past close().
    if (from + validity <= monotonicNow() || this.deps.shutdown.isClosing) {
      backend.release(fullKey, token, req).catch(() => undefined);
      return null;
    }
    const lease = new Lease(
      this.deps.reporter,
      {
        backendName,
        backend,
        key,
        fullKey,
        token,
        fence,
        mode: req.mode,
        permits: req.permits,
        permit,
        ttl: req.ttl,
        startedAt: from,
        validityMs: validity,
        autoRenew: req.autoRenew,
        lockAtLeastFor: req.lockAtLeastFor,
        maxHold: req.maxHold,
        operationTimeout: this.deps.operationTimeout,
      },
      this.deps.renewals.for(backend),
    );
    this.deps.held.add(lease);
    lease.start(short);
    this.deps.reporter.acquired(lease, monotonicNow() - startedAt);
    return lease;
  }

  /**
   * Bounds one store call of an acquisition (`attempt`, already sent); a failure becomes
   * `LockBackendError` (plus an `error` event) and frees anything the store may have granted
   * anyway.
   */
  private async bounded(
    req: LockRequest,
    key: string,
    fullKey: string,
    token: string,
    attempt: Promise<LockGrant | null>,
    timeoutMs = this.deps.operationTimeout,
  ): Promise<LockGrant | null> {
    const { backend, backendName } = req;
    try {
      return await withTimeout(attempt, timeoutMs);
    } catch (err) {
      // A refusal of the request itself (a key's holders asking other permits): nothing was
      // granted and nothing failed; the caller gets it as is.
      if (err instanceof LockConfigError) throw err;
      const error = toLockError(
        this.deps.redactor,
        backendName,
        `acquire failed for "${key}"`,
        err,
      );
      this.deps.events.emit({
        type: 'error',
        key,
        backend: backendName,
        token,
        reason: error.message,
        error,
      });
      // The store may have granted anyway (reply lost, or it arrives after the timeout): free
      // it, now and once the late reply lands. Compare-token, so never someone else's lock.
      backend.release(fullKey, token, req).catch(() => undefined);
      attempt.then(
        (late) => late && backend.release(fullKey, token, req).catch(() => undefined),
        () => undefined,
      );
      throw error;
    }
  }
}

/**
 * Whether the lease a scope holds on a key can serve a new request for it (a re-entry), else a
 * `LockConfigError` saying why. A mutex held (`exclusive`, one permit) serves any request: it
 * already excludes everyone. Otherwise the request must ask what the lease holds: a `shared`
 * hold cannot be upgraded to `exclusive` (two readers upgrading would wait for each other
 * forever), and one slot of a counted lock is not the whole key (nor a slot of another count).
 */
function checkReentry(req: LockRequest, key: string, outer: Lease): void {
  const held = outer.info;
  if (held.mode === 'exclusive' && held.permits === 1) return;
  if (held.mode === req.mode && held.permits === req.permits) return;
  if (held.mode === 'shared' && req.mode === 'exclusive') {
    throw new LockConfigError(
      'mode',
      `"${key}" is held shared by this scope: taking it exclusive inside it is refused (no ` +
        'upgrade: two readers upgrading would wait for each other forever); release the shared ' +
        "lock first, or take it with mode 'exclusive' from the start",
    );
  }
  throw new LockConfigError(
    'permits',
    `"${key}" is held by this scope as one of ${held.permits} permit(s) (mode '${held.mode}'); ` +
      `a request for ${req.permits} permit(s) (mode '${req.mode}') cannot re-enter it (one ` +
      'slot is not the whole key); ask for what the scope holds',
  );
}

/**
 * The grant's slot: `0..permits-1` (absent: 0). A slot out of range is a backend defect, refused
 * rather than handed out (two holders could then believe they own one resource).
 */
function permitOf(backendName: string, grant: LockGrant, permits: number): number {
  const permit = grant.permit ?? 0;
  if (!Number.isInteger(permit) || permit < 0 || permit >= permits) {
    throw new LockBackendError(
      backendName,
      `granted slot ${String(permit)}, outside 0..${permits - 1} for permits: ${permits}`,
    );
  }
  return permit;
}

/**
 * The grant's fence as the backend's capabilities promise it: a number from a fencing backend
 * (a grant without one is a backend defect, refused rather than handed out unfenced), `null`
 * from one without fencing.
 */
function fenceOf(backend: LockBackend, backendName: string, grant: LockGrant): number | null {
  if (!backend.capabilities.fencing) return null;
  if (typeof grant.fence !== 'number' || !Number.isSafeInteger(grant.fence)) {
    throw new LockBackendError(
      backendName,
      `granted a lock without a valid fencing token (${String(grant.fence)}) although it declares fencing`,
    );
  }
  return grant.fence;
}
