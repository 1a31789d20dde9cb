import { LockLostError } from '../../errors/lock.errors';
import type { Lock, LockMode } from '../../lock.interfaces';
import type { Lease } from './lease';
import { checkDuration } from '../shared/options';

/** What a handle needs from the engine. */
export interface HandleHost {
  /** Drops one holder from each lease, really releasing those that reach zero. */
  releaseLeases(leases: readonly Lease[]): Promise<void>;
}

/**
 * The user's view of one acquisition (first grant or re-entry). Several handles can share a
 * lease (re-entries); each has its own released flag and its own signal, aborted when this
 * handle is released or when any of its leases is lost.
 */
export class LockHandle implements Lock {
  readonly key: string;
  readonly keys: readonly string[];
  readonly token: string;
  readonly fence: number | null;
  readonly fences: readonly (number | null)[];
  readonly permit: number;
  readonly mode: LockMode;

  private released = false;
  private releasing?: Promise<void>;
  /** Created on first use of `signal` (see `Lease.controller` for why). */
  private controller?: AbortController;
  /** Detaches this handle from its leases' signals; made with the signal. */
  private unsubscribe?: Array<() => void>;
  /** A lease already lost when this handle was released: the signal reports that loss. */
  private lostBeforeRelease?: Lease;

  constructor(
    private readonly host: HandleHost,
    /** Leases in canonical key order. */
    readonly leases: readonly Lease[],
    readonly backend: string,
  ) {
    this.keys = leases.map((l) => l.info.key);
    this.key = leases.length === 1 ? this.keys[0] : this.keys.join(',');
    this.token = leases[0].info.token;
    this.fences = leases.map((l) => l.info.fence);
    this.fence = this.fences[0];
    this.permit = leases[0].info.permit;
    // What is held: a shared key anywhere makes the whole lock shared (a re-entry of an
    // exclusive hold may have asked for less).
    let mode: LockMode = 'exclusive';
    for (const lease of leases) if (lease.info.mode === 'shared') mode = 'shared';
    this.mode = mode;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      if (this.released) {
        controller.abort(
          this.lostBeforeRelease?.signal.reason ??
            new LockLostError(this.key, this.backend, 'released'),
        );
      } else {
        const unsubscribe: Array<() => void> = (this.unsubscribe = []);
        for (const lease of this.leases) {
          if (lease.signal.aborted) {
            controller.abort(lease.signal.reason);
            break;
          }
          const onAbort = (): void => {
            if (!this.released) controller.abort(lease.signal.reason);
          };
          lease.signal.addEventListener('abort', onAbort, { once: true });
          unsubscribe.push(() => lease.signal.removeEventListener('abort', onAbort));
        }
      }
    }
    return this.controller.signal;
  }

  /** Whether this handle was released. */
  get isReleased(): boolean {
    return this.released;
  }

  isHeld(): boolean {
    // Every lease is checked (not `every`'s short-circuit) so each passed deadline is reported.
    let held = !this.released;
    for (const lease of this.leases) held = lease.isHeld() && held;
    return held;
  }

  async extend(ttl?: number): Promise<void> {
    const newTtl = ttl === undefined ? undefined : checkDuration(ttl, 'ttl');
    if (this.released) throw new LockLostError(this.key, this.backend, 'already released');
    for (const lease of this.leases) await lease.extend(newTtl ?? lease.ttl);
  }

  release(): Promise<void> {
    // Idempotent, and concurrent calls share the one real release.
    if (this.releasing) return this.releasing;
    this.released = true;
    if (this.unsubscribe) for (const off of this.unsubscribe) off();
    if (!this.controller) {
      this.lostBeforeRelease = this.leases.find((lease) => lease.state === 'lost');
    } else if (!this.controller.signal.aborted) {
      this.controller.abort(new LockLostError(this.key, this.backend, 'released'));
    }
    this.releasing = this.host.releaseLeases(this.leases);
    return this.releasing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /**
   * What `console.log(lock)` / `util.inspect` show: the lock's own facts only. The default
   * would walk into the engine and the backend (its client, its options, their secrets).
   */
  [Symbol.for('nodejs.util.inspect.custom')](
    _depth: number,
    options: object,
    inspect: (value: unknown, options: object) => string,
  ): string {
    const facts = {
      key: this.key,
      backend: this.backend,
      fence: this.fence,
      mode: this.mode,
      permit: this.permit,
      held: this.isHeld(),
      released: this.released,
    };
    return `LockHandle ${inspect(facts, options)}`;
  }
}
