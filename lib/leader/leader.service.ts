import { Logger } from '@nestjs/common';
import { Lease } from '../core/engine/lease';
import type { LockEngine } from '../core/engine/lock-engine';
import { checkSignal } from '../core/settings/validation';
import { checkDuration, checkOptions } from '../core/shared/options';
import { sleep } from '../core/shared/timers';
import { LockBackendError, LockConfigError, LockShuttingDownError } from '../errors/lock.errors';
import { Elector, type ElectorHooks } from './elector';
import { HeldLeadership } from './held-leadership';
import {
  LeaderEvents,
  type LeadershipEventListener,
  type LeadershipEventName,
} from './leader-events';
import { LeaderStatuses, type LeaderStatus } from './leader-status';
import { checkText, decodeOwner, encodeLabel, leaderKey, MAX_LEADER_VALUE } from './leader-label';
import type {
  CampaignOptions,
  LeaderDecoratorOptions,
  LeaderInfo,
  Leadership,
  ObserveOptions,
} from './leader.interfaces';

const CAMPAIGN_KEYS: ReadonlySet<string> = new Set(['backend', 'ttl', 'signal', 'value']);
const DECORATOR_KEYS: ReadonlySet<string> = new Set(['backend', 'ttl', 'value']);
const OBSERVE_KEYS: ReadonlySet<string> = new Set(['backend', 'signal', 'interval']);
const QUERY_KEYS: ReadonlySet<string> = new Set(['backend']);
/** Shortest validity a leadership lease may have: its renewals (every third) need the room. */
export const MIN_LEADER_VALIDITY_MS = 1_000;
const DEFAULT_OBSERVE_MS = 1_000;
/** `leader()` looks this many times, this far apart (ms), at a holder it cannot name yet. */
const UNNAMED_HOLDER_LOOKS = 5;
const UNNAMED_HOLDER_PAUSE_MS = 25;
const MIN_OBSERVE_MS = 50;

/**
 * Leader election over the lock engine, on every backend: a name is led by whoever holds its
 * lock (`nestjs-distributed-lock:leader:<name>`, under the module's `keyPrefix`), candidates
 * wait in the store's queue (first come, first served), the term is the lock's fence, and the
 * leader's id and value travel in its owner token's label, so any instance can read who leads.
 * Inject it once `LockModule` is imported.
 */
export class LeaderService {
  private readonly electors = new Map<string, Elector>();
  private readonly closing = new AbortController();
  private readonly logger = new Logger('LeaderService');
  private readonly statuses = new LeaderStatuses();
  private readonly events: LeaderEvents;

  /** Built by `LockModule` (inject it); not constructed by users. */
  private constructor(
    private readonly engine: LockEngine,
    /** This instance's name among candidates (`leaderId`, default host name and pid). */
    readonly id: string,
  ) {
    this.events = new LeaderEvents(this.logger, id);
  }

  /** @internal The service of `engine`, naming this instance `id`. */
  static of(engine: LockEngine, id: string): LeaderService {
    return new LeaderService(engine, id);
  }

  /**
   * Campaigns for `name`: waits (first come, first served) until this instance leads, then
   * resolves its {@link Leadership}. Leadership stays until resigned, lost (its signal aborts)
   * or the application shuts down. Bad input is refused with `LockConfigError` before any I/O.
   */
  async campaign(name: string, options?: CampaignOptions): Promise<Leadership> {
    const key = leaderKey(name);
    const opts = options === undefined ? {} : checkOptions(options, CAMPAIGN_KEYS, 'options');
    const value =
      opts.value === undefined ? undefined : checkText(opts.value, 'value', MAX_LEADER_VALUE);
    const signal = opts.signal === undefined ? undefined : checkSignal(opts.signal, 'signal');
    const lockOptions = this.lockOptions(opts, signal);
    if (this.closing.signal.aborted) {
      throw new LockShuttingDownError(this.engine.backendOf(opts).name, 'no new campaigns');
    }
    this.statuses.campaigning(name);
    const lock = await this.engine.acquire(
      key,
      lockOptions,
      'wait',
      undefined,
      encodeLabel(this.id, value),
    );
    const otel = this.engine.settings.otel;
    let began = false;
    const leadership = new HeldLeadership(name, lock, (ended) => {
      if (this.statuses.ended(ended)) otel?.leadership(name, false);
      if (began) this.events.ended(ended);
    });
    if (leadership.isLeader()) {
      began = true;
      this.statuses.granted(leadership);
      otel?.leadership(name, true);
      this.events.granted(leadership);
    }
    return leadership;
  }

  /** Who leads `name` now, asked of the store from any instance; `null` when nobody does. */
  async leader(name: string, options?: { backend?: string }): Promise<LeaderInfo | null> {
    const key = leaderKey(name);
    const opts = options === undefined ? {} : checkOptions(options, QUERY_KEYS, 'options');
    for (let attempt = 1; ; attempt++) {
      const info = await this.engine.storeInfo(key, opts);
      if (!info.held) return null;
      const who = decodeOwner(info.owner);
      if (who !== undefined && info.fence !== null) return { ...who, term: info.fence };
      // A holder that keeps its record apart from the lock (SQL session locks) writes it one
      // round trip after its grant: looked at again, briefly, before giving up.
      if (attempt >= UNNAMED_HOLDER_LOOKS) {
        throw new LockBackendError(
          this.engine.backendOf(opts).name,
          `"${name}" is held, but not by a leadership this store can name (a lock taken on ` +
            'its key directly, or a holder whose session this database user cannot see)',
        );
      }
      await sleep(UNNAMED_HOLDER_PAUSE_MS);
    }
  }

  /**
   * Each change of who leads `name` (a new term, or nobody), the current state first, as seen
   * by asking the store every `interval` ms; terms only rise along it. Ends when
   * `options.signal` aborts or the application shuts down. Options are checked before any I/O.
   * Changes closer together than `interval` may be seen as one (the last). A look at the store
   * that fails (the store down) ends it with that error.
   */
  observe(name: string, options?: ObserveOptions): AsyncIterable<LeaderInfo | null> {
    leaderKey(name);
    const opts = options === undefined ? {} : checkOptions(options, OBSERVE_KEYS, 'options');
    const signal = opts.signal === undefined ? undefined : checkSignal(opts.signal, 'signal');
    const interval =
      opts.interval === undefined
        ? DEFAULT_OBSERVE_MS
        : Math.max(MIN_OBSERVE_MS, checkDuration(opts.interval, 'interval'));
    const query = opts.backend === undefined ? undefined : { backend: opts.backend as string };
    this.engine.backendOf(query);
    const stop = signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal;
    return this.changes(name, query, interval, stop);
  }

  /**
   * Subscribes to this instance's leadership events: `granted` when it starts to lead a name,
   * `ended` when that stops (`lost: true` when it was lost, not resigned or given up at
   * shutdown). Returns the unsubscribe function. A listener's failure is logged, never rethrown.
   */
  on(type: LeadershipEventName, listener: LeadershipEventListener): () => void {
    if (type !== 'granted' && type !== 'ended') {
      throw new LockConfigError(
        'event',
        `unknown leadership event "${String(type)}": use granted or ended`,
      );
    }
    if (typeof listener !== 'function') {
      throw new LockConfigError('listener', 'must be a function');
    }
    return this.events.on(type, listener);
  }

  /**
   * Where this instance stands for each name it campaigned for (or only `name`): leader or
   * follower, the term and since when while leading, and how often that changed. No I/O.
   */
  status(): LeaderStatus[];
  status(name: string): LeaderStatus;
  status(name?: string): LeaderStatus | LeaderStatus[] {
    if (name !== undefined) {
      leaderKey(name);
      return this.statuses.of(name);
    }
    return this.statuses.names().map((n) => this.statuses.of(n));
  }

  /** @internal The elector of `name` for `@LeaderOnly`/`@Leader`, started on first use. */
  elector(name: string, options: LeaderDecoratorOptions, hooks: ElectorHooks = {}): Elector {
    let elector = this.electors.get(name);
    if (elector === undefined) {
      // A ttl the backend cannot give a leadership fails here (at bootstrap), not in every campaign.
      this.lockOptions(options);
      elector = new Elector(
        name,
        (signal) => this.campaign(name, { ...options, signal }),
        hooks,
        this.logger,
      );
      this.electors.set(name, elector);
      if (!this.closing.signal.aborted) elector.start();
    }
    return elector;
  }

  /** @internal Checks decorator options once, at class definition. */
  static checkDecoratorOptions(options: unknown): LeaderDecoratorOptions {
    const opts = checkOptions(options, DECORATOR_KEYS, 'options');
    if (opts.value !== undefined) checkText(opts.value, 'value', MAX_LEADER_VALUE);
    if (opts.ttl !== undefined) checkDuration(opts.ttl, 'ttl');
    if (opts.backend !== undefined && typeof opts.backend !== 'string') {
      throw new LockConfigError('backend', 'must be the name of a configured backend');
    }
    return opts as LeaderDecoratorOptions;
  }

  /**
   * @internal Shutdown: no new campaigns, observers end, every elector resigns (the next
   * candidate leads within a round trip). Leaderships from `campaign` end with the engine's
   * release of held locks.
   */
  async shutdown(): Promise<void> {
    this.closing.abort();
    await Promise.all([...this.electors.values()].map((elector) => elector.stop()));
  }

  /** The lock options of a campaign: waits until granted, renewed while held. */
  private lockOptions(opts: Record<string, unknown>, signal?: AbortSignal): object {
    const { name, backend } = this.engine.backendOf(opts);
    const ttl = opts.ttl === undefined ? this.engine.settings.ttl : checkDuration(opts.ttl, 'ttl');
    const validity = Lease.validityOf(backend, Math.ceil(ttl));
    if (validity < MIN_LEADER_VALIDITY_MS) {
      throw new LockConfigError(
        'ttl',
        `leadership needs a lease valid for at least ${MIN_LEADER_VALIDITY_MS} ms; on backend ` +
          `"${name}" a ttl of ${ttl} ms is valid for ${Math.floor(validity)} ms`,
      );
    }
    return { backend: name, ttl, waitTimeout: Infinity, autoRenew: true, signal };
  }

  private async *changes(
    name: string,
    query: { backend: string } | undefined,
    interval: number,
    stop: AbortSignal,
  ): AsyncGenerator<LeaderInfo | null> {
    let shown: number | null | undefined;
    let highest = -Infinity;
    while (!stop.aborted) {
      const now = await this.leader(name, query);
      // Never backwards: a term at or below one already shown (a stale read) is skipped.
      if (now === null ? shown !== null : now.term > highest) {
        shown = now === null ? null : now.term;
        if (now !== null) highest = now.term;
        yield now;
      }
      await sleep(interval, stop);
    }
  }
}
