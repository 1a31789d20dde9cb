import type { ChartSpec } from '../harness/result';
import { fmt } from '../harness/result';

/** Characters of the longest bar. */
const WIDTH = 40;
/** Eighths of a block, for bar ends finer than one character. */
const PARTS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/**
 * A growth chart as text bars, one line per point, grouped by line (store), for the README:
 * the npm package page shows no image from the repository, but a code block it does. Bars are
 * to scale (log scale when the chart's values are log-scaled, as on the SVG).
 */
export function textGrowthChart(chart: ChartSpec): string {
  const points = chart.points.filter((p) => Number.isFinite(p.value) && p.value >= 0);
  const log = chart.growth?.logValues === true;
  const positive = points.map((p) => p.value).filter((v) => v > 0);
  const top = Math.max(...positive, 0);
  const bottom = Math.min(...positive, top);
  // Log scale: the smallest value gets one character, the largest the whole width.
  const length = (v: number): number => {
    if (v <= 0 || top <= 0) return 0;
    if (!log || top === bottom) return (v / top) * WIDTH;
    return (
      1 +
      ((Math.log10(v) - Math.log10(bottom)) / (Math.log10(top) - Math.log10(bottom))) * (WIDTH - 1)
    );
  };
  const groupWidth = Math.max(...points.map((p) => p.group.length));
  const labelWidth = Math.max(...points.map((p) => p.label.length));
  const lines: string[] = [];
  let previous: string | undefined;
  for (const p of points) {
    const eighths = Math.round(length(p.value) * 8);
    const bar = '█'.repeat(Math.floor(eighths / 8)) + PARTS[eighths % 8];
    const group = p.group === previous ? '' : p.group;
    previous = p.group;
    lines.push(
      `${group.padEnd(groupWidth)}  ${p.label.padStart(labelWidth)}  ${bar} ${fmt(p.value)}`,
    );
  }
  const scale = log ? ', log scale' : '';
  const x = chart.growth ? ` by ${chart.growth.xTitle}` : '';
  return [
    `*${chart.title}* (${chart.valueTitle}${x}${scale})`,
    '',
    '```text',
    ...lines,
    '```',
  ].join('\n');
}
