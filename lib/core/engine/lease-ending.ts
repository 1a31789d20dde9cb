import { LockLostError } from '../../errors/lock.errors';

/** What a lease's end names: the key as the user gave it and its backend. */
interface EndingFacts {
  readonly key: string;
  readonly backendName: string;
}

/**
 * How a lease's holders learn that it ended: its `signal`, aborted with a `LockLostError` once
 * the lease is lost or released, and the reason kept so a signal made afterwards is aborted with
 * the same one. A base class rather than a member, so a lease costs no second object.
 */
export abstract class LeaseEnding {
  /** The grant's facts; the subclass holds them. */
  protected abstract readonly info: EndingFacts;
  /**
   * Created on first use of `signal`: most locks are released without anyone looking at it,
   * and an AbortController plus a LockLostError (stack trace) per acquisition is a large share
   * of an uncontended cycle's CPU.
   */
  private controller?: AbortController;
  /** Why the lease ended, kept so a signal created afterwards is aborted with the same reason. */
  private ended?: { reason: string; cause?: unknown; error?: LockLostError };

  /** Aborted (reason `LockLostError`) when the lease is lost or released. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.ended) this.controller.abort(this.endError());
    }
    return this.controller.signal;
  }

  /** Records why the lease ended and aborts the signal if anyone holds it. */
  protected end(reason: string, cause?: unknown): void {
    this.ended = { reason, cause };
    this.controller?.abort(this.endError());
  }

  /** A `LockLostError` of this lease for `reason`. */
  protected lostError(reason: string, cause?: unknown): LockLostError {
    return new LockLostError(
      this.info.key,
      this.info.backendName,
      reason,
      cause === undefined ? undefined : { cause },
    );
  }

  private endError(): LockLostError {
    const ended = this.ended!;
    return (ended.error ??= this.lostError(ended.reason, ended.cause));
  }
}
