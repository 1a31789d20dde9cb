import { Logger } from '@nestjs/common';
import type {
  LockEvent,
  LockEventListener,
  LockEventName,
  LockMetrics,
} from '../../lock.interfaces';
import type { OtelLockMetrics } from './otel-metrics';
import { Listeners } from '../shared/listeners';

/** Event fan-out plus metrics and logging, in one place so every backend reports alike. */
export class LockEvents {
  private readonly listeners: Listeners<LockEventName, LockEvent>;
  private readonly metrics = new Map<string, LockMetrics>();

  constructor(
    private readonly logger: Logger,
    /** OpenTelemetry instruments fed alongside the in-process counters, if any. */
    private readonly otel?: OtelLockMetrics,
  ) {
    this.listeners = new Listeners(logger, 'lock');
  }

  /** Subscribes; returns the unsubscribe function. */
  on(event: LockEventName, listener: LockEventListener): () => void {
    return this.listeners.on(event, listener);
  }

  /** Emits to listeners, counts metrics, logs at a level fitting the event. */
  emit(event: LockEvent): void {
    this.count(event);
    this.log(event);
    this.listeners.emit(event);
  }

  /**
   * Whether anyone listens for `type`. The hot-path reports (acquired, released) build no
   * event object when nobody does: they count their metrics directly.
   */
  listening(type: LockEventName): boolean {
    return this.listeners.listening(type);
  }

  /** Counts a grant after waiting `waitedMs` (what `emit` of `acquired` counts). */
  countAcquired(backend: string, waitedMs: number): void {
    const m = this.metricsFor(backend);
    m.lock_acquired_total++;
    m.lock_held++;
    m.lock_wait_seconds.sum += waitedMs / 1000;
    m.lock_wait_seconds.count++;
    this.otel?.acquired(backend, waitedMs);
  }

  /** Counts a lock that ended after `heldMs` (what `emit` of `released` or `lost` counts). */
  countEnded(backend: string, heldMs: number, lost: boolean): void {
    const m = this.metricsFor(backend);
    if (lost) m.lock_lost_total++;
    m.lock_held = Math.max(0, m.lock_held - 1);
    m.lock_hold_seconds.sum += heldMs / 1000;
    m.lock_hold_seconds.count++;
    this.otel?.ended(backend, heldMs, lost);
  }

  /** Counts an acquisition attempt (emitted as no event: attempts are frequent). */
  attempt(backend: string): void {
    this.metricsFor(backend).lock_acquire_attempts_total++;
    this.otel?.attempt(backend);
  }

  /** Counts a re-entry served without a backend call. */
  reentered(backend: string): void {
    this.metricsFor(backend).lock_reentered_total++;
  }

  /** Counts an acquisition that gave up busy. */
  notAcquired(backend: string, waitedMs: number): void {
    const m = this.metricsFor(backend);
    m.lock_not_acquired_total++;
    m.lock_wait_seconds.sum += waitedMs / 1000;
    m.lock_wait_seconds.count++;
    this.otel?.notAcquired(backend, waitedMs);
  }

  /** A snapshot of the metrics, per backend. */
  snapshot(): Record<string, LockMetrics> {
    const out: Record<string, LockMetrics> = {};
    for (const [backend, m] of this.metrics) {
      out[backend] = {
        ...m,
        lock_wait_seconds: { ...m.lock_wait_seconds },
        lock_hold_seconds: { ...m.lock_hold_seconds },
      };
    }
    return out;
  }

  /** Makes sure a backend shows up in metrics even before its first use. */
  register(backend: string): void {
    this.metricsFor(backend);
  }

  private metricsFor(backend: string): LockMetrics {
    let m = this.metrics.get(backend);
    if (!m) {
      m = {
        lock_acquire_attempts_total: 0,
        lock_acquired_total: 0,
        lock_not_acquired_total: 0,
        lock_lost_total: 0,
        lock_reentered_total: 0,
        lock_held: 0,
        lock_wait_seconds: { sum: 0, count: 0 },
        lock_hold_seconds: { sum: 0, count: 0 },
      };
      this.metrics.set(backend, m);
    }
    return m;
  }

  private count(event: LockEvent): void {
    switch (event.type) {
      case 'acquired':
        this.countAcquired(event.backend, event.waitedMs ?? 0);
        break;
      case 'released':
      case 'lost':
        this.countEnded(event.backend, event.heldMs ?? 0, event.type === 'lost');
        break;
      case 'renewed':
        this.otel?.renewed(event.backend);
        break;
      default:
        break;
    }
  }

  /**
   * Only what needs a human: losses (warn) and failures (error). Acquire/release/contention are
   * hot-path events: observe them through `on()` and metrics instead of log lines.
   */
  private log(event: LockEvent): void {
    if (event.type !== 'lost' && event.type !== 'error') return;
    const where = `lock "${event.key}" on "${event.backend}"`;
    switch (event.type) {
      case 'lost':
        // A lost lock means the code that held it may now race another holder: always loud.
        this.logger.warn(
          `${where} LOST after ${Math.round(event.heldMs ?? 0)} ms: ${event.reason}`,
        );
        break;
      case 'error':
        this.logger.error(`${where}: ${event.reason}`, (event.error as Error | undefined)?.stack);
        break;
      default:
        break;
    }
  }
}
