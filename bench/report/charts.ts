import type { ChartSpec } from '../harness/result';

/** vega and vega-lite are ESM with top-level await: loaded with a real dynamic import. */
const importEsm = new Function('specifier', 'return import(specifier)') as <T>(
  specifier: string,
) => Promise<T>;

interface VegaLite {
  compile(spec: object): { spec: object };
}
interface Vega {
  parse(spec: object): object;
  View: new (runtime: object, options: { renderer: 'none' }) => { toSVG(): Promise<string> };
}

const COLOURS: Record<string, string> = {
  ours: '#1f77b4',
  peer: '#9e9e9e',
  floor: '#2ca02c',
  'one lock': '#9e9e9e',
  segmented: '#1f77b4',
  // The scale suite's stores (one line each).
  Redis: '#d62728',
  memory: '#9e9e9e',
  'PostgreSQL table': '#1f77b4',
  ZooKeeper: '#2ca02c',
};

/**
 * Renders one chart to an SVG string with vega-lite (declarative spec → vega → SVG, no
 * browser or canvas needed): one bar per point, coloured by group (ours / peer / floor), or
 * for a growth chart one line per group.
 */
export async function renderChart(chart: ChartSpec): Promise<string> {
  const vl = await importEsm<VegaLite>('vega-lite');
  const vega = await importEsm<Vega>('vega');
  const spec = chart.growth ? growthSpec(chart, chart.growth) : barSpec(chart);
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}

function colourScale(groups: readonly string[]): { domain: string[]; range: string[] } {
  return { domain: [...groups], range: groups.map((g) => COLOURS[g] ?? '#ff7f0e') };
}

/**
 * Lines of cost against work, both on log scales where they span factors of 10 (symlog for the
 * values: a footprint or a count can be 0), each point labelled with its value.
 */
function growthSpec(chart: ChartSpec, growth: NonNullable<ChartSpec['growth']>): object {
  const groups = [...new Set(chart.points.map((p) => p.group))];
  const xs = [...new Set(chart.points.map((p) => p.x ?? NaN))].sort((a, b) => a - b);
  const x = {
    field: 'x',
    type: 'quantitative',
    scale: { type: 'log', padding: 16 },
    title: growth.xTitle,
    axis: { values: xs, format: '~s', grid: false },
  };
  const y = {
    field: 'value',
    type: 'quantitative',
    title: chart.valueTitle,
    ...(growth.logValues ? { scale: { type: 'symlog' } } : {}),
  };
  const color = { field: 'group', type: 'nominal', title: null, scale: colourScale(groups) };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: chart.title,
    width: 360,
    height: 220,
    background: 'white',
    data: { values: chart.points },
    layer: [
      { mark: { type: 'line', point: true }, encoding: { x, y, color } },
      {
        mark: { type: 'text', dy: -8 },
        encoding: { x, y, color, text: { field: 'value', type: 'quantitative', format: ',.3~r' } },
      },
    ],
  };
}

/** One bar per point; several under one label stand side by side. */
function barSpec(chart: ChartSpec): object {
  const groups = [...new Set(chart.points.map((p) => p.group))];
  const labels = new Set(chart.points.map((p) => p.label));
  // Several bars under one label (ours and floor per database) stand side by side, not stacked.
  const grouped = labels.size < chart.points.length;
  const xOffset = grouped ? { xOffset: { field: 'group', type: 'nominal', sort: groups } } : {};
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: chart.title,
    width: Math.max(240, labels.size * (grouped ? 70 * groups.length : 120)),
    height: 220,
    background: 'white',
    data: { values: chart.points },
    layer: [
      {
        mark: { type: 'bar' },
        encoding: {
          x: {
            field: 'label',
            type: 'nominal',
            sort: null,
            title: null,
            axis: { labelAngle: 0, labelLimit: 160 },
          },
          y: { field: 'value', type: 'quantitative', title: chart.valueTitle, stack: null },
          ...xOffset,
          color: {
            field: 'group',
            type: 'nominal',
            title: null,
            scale: colourScale(groups),
          },
        },
      },
      {
        mark: { type: 'text', dy: -6 },
        encoding: {
          x: { field: 'label', type: 'nominal', sort: null },
          y: { field: 'value', type: 'quantitative', stack: null },
          ...xOffset,
          text: { field: 'value', type: 'quantitative', format: ',.3~r' },
        },
      },
    ],
  };
}
