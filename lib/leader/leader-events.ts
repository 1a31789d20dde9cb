import type { Logger } from '@nestjs/common';
import { Listeners } from '../core/shared/listeners';
import { LockLostError } from '../errors/lock.errors';
import type { Leadership } from './leader.interfaces';

/** What a leadership event is about: this instance started to lead, or stopped. */
export type LeadershipEventName = 'granted' | 'ended';

/** One change of this instance's leadership of a name (`LeaderService.on`). */
export interface LeadershipEvent {
  /** `granted` or `ended`. */
  readonly type: LeadershipEventName;
  /** The name led. */
  readonly name: string;
  /** The backend it is held on. */
  readonly backend: string;
  /** The term that started or ended. */
  readonly term: number;
  /** This instance's id (`LeaderService.id`). */
  readonly id: string;
  /** `ended` only: the leadership was lost (not resigned or given up at shutdown). */
  readonly lost?: boolean;
  /** `ended` only: why it ended (`released`, or how it was lost). */
  readonly reason?: string;
}

/** A listener of leadership events; what it throws or rejects is logged, never rethrown. */
export type LeadershipEventListener = (event: LeadershipEvent) => void | Promise<void>;

/**
 * This instance's leadership events: listeners by type, and the log line of each event (a
 * grant and a resignation at `log`, a loss at `warn`: another instance may lead now).
 */
export class LeaderEvents {
  private readonly listeners: Listeners<LeadershipEventName, LeadershipEvent>;

  constructor(
    private readonly logger: Logger,
    private readonly id: string,
  ) {
    this.listeners = new Listeners(logger, 'leadership');
  }

  /** Subscribes; returns the unsubscribe function. */
  on(type: LeadershipEventName, listener: LeadershipEventListener): () => void {
    return this.listeners.on(type, listener);
  }

  /** `leadership` started. */
  granted(leadership: Leadership): void {
    this.logger.log(
      `"${leadership.name}": leading, term ${leadership.term} on ${leadership.backend}`,
    );
    this.listeners.emit({ type: 'granted', ...this.about(leadership) });
  }

  /** `leadership` ended: resigned or released at shutdown, or lost (its signal's reason says). */
  ended(leadership: Leadership): void {
    const why: unknown = leadership.signal.reason;
    const reason = why instanceof LockLostError ? why.reason : String(why);
    const lost = reason !== 'released';
    const line = `"${leadership.name}": term ${leadership.term} on ${leadership.backend} ended (${reason})`;
    if (lost) this.logger.warn(line);
    else this.logger.log(line);
    this.listeners.emit({ type: 'ended', ...this.about(leadership), lost, reason });
  }

  private about(leadership: Leadership) {
    const { name, backend, term } = leadership;
    return { name, backend, term, id: this.id };
  }
}
