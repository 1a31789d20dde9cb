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
};

/**
 * Renders one bar chart to an SVG string with vega-lite (declarative spec → vega → SVG, no
 * browser or canvas needed): one bar per point, coloured by group (ours / peer / floor).
 */
export async function renderChart(chart: ChartSpec): Promise<string> {
  const vl = await importEsm<VegaLite>('vega-lite');
  const vega = await importEsm<Vega>('vega');
  const groups = [...new Set(chart.points.map((p) => p.group))];
  const labels = new Set(chart.points.map((p) => p.label));
  // Several bars under one label (ours and floor per database) stand side by side, not stacked.
  const grouped = labels.size < chart.points.length;
  const xOffset = grouped ? { xOffset: { field: 'group', type: 'nominal', sort: groups } } : {};
  const spec = {
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
            scale: { domain: groups, range: groups.map((g) => COLOURS[g] ?? '#ff7f0e') },
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
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}
