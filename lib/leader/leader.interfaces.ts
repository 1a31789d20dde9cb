/**
 * This instance's leadership of one name: the lock behind it seen as a term. Got from
 * `LeaderService.campaign`, and handed to `@Leader` providers' `onLeadershipGranted`.
 */
export interface Leadership {
  /** The name led. */
  readonly name: string;
  /** The backend it is held on. */
  readonly backend: string;
  /**
   * Strictly increasing per name across all grants (the lock's fence): a resource that keeps
   * the highest term it saw refuses a stale leader's writes.
   */
  readonly term: number;
  /** When this instance started to lead (wall clock, for display). */
  readonly since: Date;
  /** Aborted (reason `LockLostError`) when leadership is lost or resigned. */
  readonly signal: AbortSignal;
  /**
   * Whether this instance leads now: false once lost, resigned, or past its lease by the
   * monotonic clock (a leader whose renewal is late stops believing it leads before its lease
   * could pass to another).
   */
  isLeader(): boolean;
  /**
   * Gives leadership up: the next candidate leads at once (no ttl wait). Once only: a second
   * call is refused with `LockConfigError` (field `resign`); resigning a lost leadership resolves.
   */
  resign(): Promise<void>;
}

/** Options of `LeaderService.campaign`. */
export interface CampaignOptions {
  /** Backend to campaign on (default: the module's default backend). */
  backend?: string;
  /** Lease of the leadership lock, ms (default: the module's `defaults.ttl`). */
  ttl?: number;
  /** Stops campaigning: the call rejects with `LockAbortedError` and leaves nothing in the store. */
  signal?: AbortSignal;
  /** Text any instance reads with `leader(name)` while this one leads (at most 256 characters). */
  value?: string;
}

/** Who leads a name, as any instance reads it (`LeaderService.leader`). */
export interface LeaderInfo {
  /** The leader's `LeaderService.id` (default host name and pid). */
  readonly id: string;
  /** The `value` it campaigned with, if any. */
  readonly value?: string;
  /** Its term (the leadership lock's fence). */
  readonly term: number;
}

/** Options of `LeaderService.observe`. */
export interface ObserveOptions {
  /** Backend the name is led on (default: the module's default backend). */
  backend?: string;
  /** Ends the observation: the iteration returns. */
  signal?: AbortSignal;
  /** How often the store is asked, ms (default 1 000, at least 50). */
  interval?: number;
}

/** Options of `@Leader` and `@LeaderOnly`: those of `campaign`, without the per-call signal. */
export type LeaderDecoratorOptions = Omit<CampaignOptions, 'signal'>;

/** A `@Leader` provider told that it leads; `leadership.signal` stops the work. */
export interface OnLeadershipGranted {
  /** Called each time this instance starts to lead the provider's name. */
  onLeadershipGranted(leadership: Leadership): void | Promise<void>;
}

/** A `@Leader` provider told that it no longer leads. */
export interface OnLeadershipRevoked {
  /** Called each time a leadership this instance had ends (lost, resigned, or at shutdown). */
  onLeadershipRevoked(): void | Promise<void>;
}
