import type { Logger } from '@nestjs/common';
import { messageOf } from '../core/shared/error-message';
import { LockConfigError } from '../errors/lock.errors';
import { sleep } from '../core/shared/timers';
import type { Leadership } from './leader.interfaces';

/** What an elector tells its owner (a `@Leader` provider's hooks). */
export interface ElectorHooks {
  granted?(leadership: Leadership): void | Promise<void>;
  revoked?(): void | Promise<void>;
}

/** Retry delays after failed campaigns (the store down), ms, by consecutive failure. */
const RETRY_MS = [200, 500, 1_000, 2_000, 5_000];

/**
 * Campaigns for one name for as long as the application runs: after a loss it campaigns again
 * (queued behind the new leader), after a failed campaign (the store down) it retries with
 * backoff. What `@Leader` and `@LeaderOnly` run on. `stop()` resigns, so the next candidate
 * leads at once.
 */
export class Elector {
  private readonly stopping = new AbortController();
  private current?: Leadership;
  private loop?: Promise<void>;

  constructor(
    readonly name: string,
    /** One campaign, aborted by `signal`. */
    private readonly campaign: (signal: AbortSignal) => Promise<Leadership>,
    private readonly hooks: ElectorHooks,
    private readonly logger: Logger,
  ) {}

  /** Starts campaigning (once). */
  start(): void {
    this.loop ??= this.run();
  }

  /** This instance's leadership of the name, while it leads. */
  leading(): Leadership | undefined {
    return this.current?.isLeader() ? this.current : undefined;
  }

  /** Stops campaigning and resigns; resolves once the revoked hook (if any) has run. */
  async stop(): Promise<void> {
    this.stopping.abort();
    const lead = this.current;
    if (lead) await lead.resign().catch(() => undefined);
    await this.loop;
  }

  private async run(): Promise<void> {
    const stop = this.stopping.signal;
    for (let failures = 0; !stop.aborted;) {
      let lead: Leadership;
      try {
        lead = await this.campaign(stop);
        failures = 0;
      } catch (err) {
        if (stop.aborted) return;
        if (err instanceof LockConfigError) {
          // Bad options are not cured by waiting: said once, and no more campaigns.
          this.logger.error(`leadership "${this.name}": ${messageOf(err)}; not campaigning`);
          return;
        }
        const delay = RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)];
        this.logger.warn(
          `leadership "${this.name}": campaign failed (${messageOf(err)}); again in ${delay} ms`,
        );
        await sleep(delay, stop);
        continue;
      }
      this.current = lead;
      await this.call('onLeadershipGranted', () => this.hooks.granted?.(lead));
      await ended(lead.signal);
      this.current = undefined;
      await this.call('onLeadershipRevoked', () => this.hooks.revoked?.());
    }
  }

  /** Runs a hook; its failure is logged, never ends the campaign. */
  private async call(hook: string, fn: () => unknown): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.logger.error(`leadership "${this.name}": ${hook} threw: ${messageOf(err)}`);
    }
  }
}

/** Resolves when `signal` aborts. */
function ended(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}
