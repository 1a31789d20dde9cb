import { Logger } from '@nestjs/common';
import { LockConfigError } from '../../errors/lock.errors';
import { describe } from '../../core/shared/options';
import { monotonicNow } from '../../core/shared/clock';
import { withTimeout } from '../../core/shared/timers';
import type { RedisConnection } from './redis-connection';

/** The line of `INFO server` that says how long the node has been up. */
const UPTIME = /^uptime_in_seconds:(\d+)/m;

/**
 * Redis's "delayed restart", done by the client. A node restarted without its data (no
 * persistence, or an `fsync` that lost the last writes) has forgotten the locks it granted, while
 * their holders still believe they hold them: until it has been up for longer than any lease it
 * could have granted (`guardMs`, at least every ttl this process asked for), it is not trusted
 * to grant (a single Redis grants nothing; a Redlock node does not count towards a quorum).
 *
 * The node's uptime (`INFO server`, whole seconds, the start taken as late as it could have
 * been) is read when a connection is made or made again, and before the first
 * grant on a connection that was already up. A node whose user may not run `INFO` (an ACL
 * without `+info`) cannot be guarded: it is trusted, with a warning.
 */
export class RestartGuard {
  /** Monotonic time the node started at the latest, as last read; undefined until read. */
  private startedAt?: number;
  /** The read of the node's uptime under way. */
  private reading?: Promise<void>;
  private guardMs: number;
  private warnedUntrusted?: number;
  private warnedNoInfo = false;
  private warnedTtl = 0;
  private readonly logger = new Logger('LockService');

  constructor(
    private readonly connection: RedisConnection,
    /** Runs a plain command on the node (through its connection). */
    private readonly command: (args: readonly string[]) => Promise<unknown>,
    /** The longest lease the node could have granted, ms; `false`: no guard. */
    guardMs: number | false,
    /** Who the warnings name: `redis backend "main"`, `redlock backend "q" node 10.0.0.1:6379`. */
    private readonly label: string,
  ) {
    this.guardMs = guardMs === false ? -1 : guardMs;
    if (guardMs === false) return;
    connection.onReady(() => {
      this.startedAt = undefined;
      this.read().catch(() => undefined);
    });
    connection.onDown(() => {
      this.startedAt = undefined;
      this.reading = undefined;
    });
  }

  /** Trusted to grant now, as far as is known without a round trip (the hot path). */
  trustedNow(): boolean {
    if (this.guardMs < 0) return true;
    return this.startedAt !== undefined && monotonicNow() >= this.startedAt + this.guardMs;
  }

  /**
   * How long until the node is trusted to grant, ms (0: now), reading its uptime first when it
   * is not known; rejects when the node cannot be asked (down, or no answer within `boundMs`).
   */
  async untilTrusted(boundMs: number): Promise<number> {
    if (this.guardMs < 0) return 0;
    if (this.startedAt === undefined) await withTimeout(this.read(), boundMs);
    return Math.max(0, this.startedAt! + this.guardMs - monotonicNow());
  }

  /**
   * A lease of `ttlMs` was asked for: the guard covers it from now on, with a warning the first
   * time a ttl outgrows it (another instance's longer leases are covered only by configuring
   * the guard for them).
   */
  noteTtl(ttlMs: number): void {
    if (this.guardMs < 0 || ttlMs <= this.guardMs) return;
    if (ttlMs > this.warnedTtl) {
      this.warnedTtl = ttlMs;
      this.logger.warn(
        `${this.label}: a lock asked for a ttl of ${ttlMs} ms, longer than restartGuard ` +
          `(${this.guardMs} ms): the guard now waits that long after a restart; set restartGuard ` +
          'to the longest ttl any instance uses',
      );
    }
    this.guardMs = ttlMs;
  }

  /** Reads the node's uptime (once at a time). */
  private read(): Promise<void> {
    this.reading ??= this.readUptime().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async readUptime(): Promise<void> {
    let info: unknown;
    try {
      info = await this.command(['INFO', 'server']);
    } catch (err) {
      if (!/NOPERM|permission/i.test(String((err as Error | undefined)?.message))) throw err;
      if (!this.warnedNoInfo) {
        this.warnedNoInfo = true;
        this.logger.warn(
          `${this.label}: INFO is refused (${(err as Error).message}), so a restart without data ` +
            'cannot be guarded against: allow the user INFO (ACL "+info") or set restartGuard: false',
        );
      }
      this.startedAt = -Infinity;
      return;
    }
    const match = UPTIME.exec(String(info));
    if (!match) throw new Error('INFO server did not say uptime_in_seconds');
    // Up for at least this many whole seconds when it answered: it started this long before the
    // reply at the latest (the latest start is the safe one to count from).
    this.startedAt = monotonicNow() - Number(match[1]) * 1_000;
    const left = this.startedAt + this.guardMs - monotonicNow();
    if (left > 0 && this.warnedUntrusted !== this.startedAt) {
      this.warnedUntrusted = this.startedAt;
      this.logger.warn(
        `${this.label}: ${this.connection.endpoint} started ${match[1]} s ago and may have ` +
          `forgotten locks it granted: it is not trusted to grant for ${Math.ceil(left)} ms more ` +
          '(restartGuard; false turns it off for a node that keeps its data)',
      );
    }
  }
}

/** `restartGuard`: a whole number of ms from 0 to a day, or `false`. */
export function checkRestartGuard(value: unknown, field: string): void {
  if (value === false) return;
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 86_400_000) {
    throw new LockConfigError(
      field,
      `must be false or a whole number of ms from 0 to 86400000 (a day), got ${describe(value)}`,
    );
  }
}
