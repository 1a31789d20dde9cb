/**
 * Lock metrics through the OpenTelemetry metrics API (`@opentelemetry/api`, an optional peer).
 * Without the package nothing is loaded and nothing is recorded; with the package but no SDK,
 * the API's global meter is a no-op. Only the backend name labels a lock series (keys are
 * unbounded), and the leadership name a leadership series.
 * The API's types are declared here structurally, so no published `.d.ts` imports the peer.
 */
import { isModuleNotFound } from '../shared/optional-package';

/** The part of `@opentelemetry/api` used here. */
interface OtelApi {
  metrics: { getMeter(name: string): OtelMeter };
}
interface OtelInstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}
interface OtelMeter {
  createCounter(name: string, options?: OtelInstrumentOptions): OtelCounter;
  createUpDownCounter(name: string, options?: OtelInstrumentOptions): OtelCounter;
  createHistogram(name: string, options?: OtelInstrumentOptions): OtelHistogram;
}
interface OtelCounter {
  add(value: number, attributes?: Readonly<Record<string, string>>): void;
}
interface OtelHistogram {
  record(value: number, attributes?: Readonly<Record<string, string>>): void;
}

/** Meter (instrumentation scope) name of every lock instrument. */
export const LOCK_METER_NAME = 'nestjs-distributed-lock';

/** Waits and holds of locks: from a sub-millisecond hand-off to minutes-long jobs. */
const SECONDS_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
];

/** Records lock activity on OpenTelemetry instruments, labelled `lock.backend`. */
export class OtelLockMetrics {
  private readonly attempts: OtelCounter;
  private readonly acquiredCount: OtelCounter;
  private readonly notAcquiredCount: OtelCounter;
  private readonly lostCount: OtelCounter;
  private readonly renewals: OtelCounter;
  private readonly held: OtelCounter;
  private readonly wait: OtelHistogram;
  private readonly hold: OtelHistogram;
  private readonly leaderTransitions: OtelCounter;
  private readonly leading: OtelCounter;
  /** Attribute objects per backend (and outcome), built once: recording allocates nothing. */
  private readonly labels = new Map<
    string,
    { base: Record<string, string>; acquired: Record<string, string>; busy: Record<string, string> }
  >();

  constructor(meter: OtelMeter) {
    const counter = (name: string, description: string, unit: string) =>
      meter.createCounter(name, { description, unit });
    this.attempts = counter(
      'lock.acquire.attempts',
      'Lock acquisition attempts (re-entries excluded)',
      '{attempt}',
    );
    this.acquiredCount = counter('lock.acquired', 'Locks acquired', '{lock}');
    this.notAcquiredCount = counter(
      'lock.not_acquired',
      'Acquisitions that gave up because the lock stayed busy',
      '{attempt}',
    );
    this.lostCount = counter('lock.lost', 'Locks lost while held', '{lock}');
    this.renewals = counter('lock.renewals', 'Lease renewals that succeeded', '{renewal}');
    this.held = meter.createUpDownCounter('lock.held', {
      description: 'Locks held now',
      unit: '{lock}',
    });
    const seconds = (name: string, description: string) =>
      meter.createHistogram(name, {
        description,
        unit: 's',
        advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
      });
    this.wait = seconds(
      'lock.wait.duration',
      'Time from asking for a lock to getting it or giving up (label lock.outcome)',
    );
    this.hold = seconds('lock.hold.duration', 'Time a lock was held, until released or lost');
    this.leaderTransitions = counter(
      'leadership.transitions',
      'Times this instance started or stopped leading (label leadership.name)',
      '{transition}',
    );
    this.leading = meter.createUpDownCounter('leadership.leading', {
      description: 'Whether this instance leads, per name: 1 or 0 (label leadership.name)',
      unit: '{leadership}',
    });
  }

  /**
   * This instance started (`true`) or stopped leading `name`. Labelled by the name: names are
   * the application's own, few and fixed, unlike lock keys.
   */
  leadership(name: string, leading: boolean): void {
    const labels = { 'leadership.name': name };
    this.leaderTransitions.add(1, labels);
    this.leading.add(leading ? 1 : -1, labels);
  }

  /**
   * The instruments on the global meter provider, or `undefined` when `@opentelemetry/api` is
   * not installed. Register your SDK's meter provider before the Nest app is created.
   */
  static async load(
    importApi: () => Promise<unknown> = () => import('@opentelemetry/api'),
  ): Promise<OtelLockMetrics | undefined> {
    let api: OtelApi;
    try {
      api = (await importApi()) as OtelApi;
    } catch (err) {
      if (isModuleNotFound(err)) return undefined;
      throw err;
    }
    return new OtelLockMetrics(api.metrics.getMeter(LOCK_METER_NAME));
  }

  /** An acquisition attempt (not a re-entry). */
  attempt(backend: string): void {
    this.attempts.add(1, this.labelsOf(backend).base);
  }

  /** A grant after waiting `waitedMs`. */
  acquired(backend: string, waitedMs: number): void {
    const labels = this.labelsOf(backend);
    this.acquiredCount.add(1, labels.base);
    this.held.add(1, labels.base);
    this.wait.record(waitedMs / 1000, labels.acquired);
  }

  /** An acquisition that gave up busy after `waitedMs`. */
  notAcquired(backend: string, waitedMs: number): void {
    const labels = this.labelsOf(backend);
    this.notAcquiredCount.add(1, labels.base);
    this.wait.record(waitedMs / 1000, labels.busy);
  }

  /** A held lock ended after `heldMs`: released, or lost. */
  ended(backend: string, heldMs: number, lost: boolean): void {
    const labels = this.labelsOf(backend);
    if (lost) this.lostCount.add(1, labels.base);
    this.held.add(-1, labels.base);
    this.hold.record(heldMs / 1000, labels.base);
  }

  /** A lease renewal the store accepted. */
  renewed(backend: string): void {
    this.renewals.add(1, this.labelsOf(backend).base);
  }

  private labelsOf(backend: string) {
    let labels = this.labels.get(backend);
    if (!labels) {
      labels = {
        base: { 'lock.backend': backend },
        acquired: { 'lock.backend': backend, 'lock.outcome': 'acquired' },
        busy: { 'lock.backend': backend, 'lock.outcome': 'not_acquired' },
      };
      this.labels.set(backend, labels);
    }
    return labels;
  }
}
