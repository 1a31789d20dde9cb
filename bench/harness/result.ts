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
  /** `>=`: measured must reach the target; `<=`: must stay under it. */
  comparison: '>=' | '<=';
  /** How the numbers read: a ratio (`x`), milliseconds or a percentage. */
  unit: 'x' | 'ms' | '%';
  met: boolean;
}

/** One bar in a chart. */
export interface ChartPoint {
  /** Bar label (x axis). */
  label: string;
  /** Colour group (e.g. "ours", "peer", "floor"). */
  group: string;
  value: number;
}

/** A bar chart, rendered to SVG by the report (vega-lite). */
export interface ChartSpec {
  id: string;
  title: string;
  /** Axis title of the values, with its unit. */
  valueTitle: string;
  points: ChartPoint[];
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
  comparison: '>=' | '<=',
  goal: number,
  unit: TargetCheck['unit'],
): TargetCheck {
  const met = comparison === '>=' ? measured >= goal : measured <= goal;
  return { id, label, measured, target: goal, comparison, unit, met };
}

/** Fixed-precision number for a table cell (3 significant digits below 100, integers above). */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(digits)).toString();
}
