/** A rendered table: the markdown report prints it as is. */
export interface BenchTable {
  title: string;
  columns: string[];
  rows: string[][];
  /** Printed under the table: how to read it, what was measured. */
  note?: string;
}

/** One target from the issue, checked against what this run measured. */
export interface TargetCheck {
  id: string;
  /** What is compared, e.g. "ours / raw floor, uncontended cycle". */
  label: string;
  measured: number;
  target: number;
  /** `>=`: measured must reach the target; `>`: must pass it; `<=`: must stay under it. */
  comparison: '>=' | '>' | '<=';
  /**
   * How the numbers read: a ratio (`x`), milliseconds, a percentage (of one CPU core for the
   * scale suite), store calls per second, bytes, or holders of one key at once.
   */
  unit: 'x' | 'ms' | '%' | 'calls/s' | 'B' | 'holders';
  met: boolean;
}

/** One bar in a chart, or one point of a growth chart's line. */
export interface ChartPoint {
  /** Bar label (x axis); in a growth chart, the amount of work as printed (e.g. "10k"). */
  label: string;
  /** Colour group (e.g. "ours", "peer", "floor"); in a growth chart, one line per group. */
  group: string;
  value: number;
  /** Growth charts only: the amount of work (held locks, waiters, keys) on the x axis. */
  x?: number;
}

/**
 * A chart, rendered to SVG by the report (vega-lite): bars by default; with `growth`, one line
 * per group of how a cost grows with the amount of work (log-scaled x, as the sizes go by
 * factors of 10).
 */
export interface ChartSpec {
  id: string;
  title: string;
  /** Axis title of the values, with its unit. */
  valueTitle: string;
  points: ChartPoint[];
  /** Draw lines of `value` against each point's `x` instead of bars. */
  growth?: {
    /** Axis title of the amount of work. */
    xTitle: string;
    /** Log-scale the values too (costs spanning several factors of 10). */
    logValues?: boolean;
  };
}

/** What one suite produced. */
export interface SuiteResult {
  id: string;
  title: string;
  tables: BenchTable[];
  targets: TargetCheck[];
  charts: ChartSpec[];
  /** Raw figures behind the tables, kept in the JSON for later comparison. */
  data: Record<string, unknown>;
  /** Seconds the suite took. */
  seconds: number;
  /**
   * ISO date and time the suite was measured, when it was rerun alone and merged into the run
   * (`--only id --merge`); absent: measured with the run.
   */
  measuredAt?: string;
}

/** A whole `npm run bench` run. */
export interface BenchRun {
  profile: string;
  /** ISO date and time the run started. */
  startedAt: string;
  machine: string;
  /** Server versions the run talked to. */
  servers: Record<string, string>;
  seconds: number;
  suites: SuiteResult[];
}

/** Checks `measured` against `target` in the given direction. */
export function target(
  id: string,
  label: string,
  measured: number,
  comparison: TargetCheck['comparison'],
  goal: number,
  unit: TargetCheck['unit'],
): TargetCheck {
  const met =
    comparison === '>='
      ? measured >= goal
      : comparison === '>'
        ? measured > goal
        : measured <= goal;
  return { id, label, measured, target: goal, comparison, unit, met };
}

/** A target's number with its unit: "0.93×", "36.1 ms", "4.2%", "60 calls/s", "512 B", "4 holders". */
export function withUnit(value: number, unit: TargetCheck['unit']): string {
  // A figure voided by its run (locks lost), or null once read back from JSON.
  if (!Number.isFinite(value)) return 'n/a';
  if (unit === 'x') return `${fmt(value)}×`;
  if (unit === '%') return `${fmt(value)}%`;
  return `${fmt(value)} ${unit}`;
}

/** Fixed-precision number for a table cell (3 significant digits below 100, integers above). */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(digits)).toString();
}
