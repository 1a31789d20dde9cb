// The README's generated sections (chaos matrix, compatibility table): each sits between two
// marker comments, is rendered from data by code, and is compared byte for byte by a test.

/** The two marker comments around one generated section. */
export interface ReadmeMarkers {
  readonly start: string;
  readonly end: string;
}

/** `lines` between the markers, with Prettier told to keep them exactly as rendered. */
export function markedBlock(markers: ReadmeMarkers, lines: readonly string[]): string {
  return [
    markers.start,
    '<!-- prettier-ignore-start -->',
    '',
    ...lines,
    '',
    '<!-- prettier-ignore-end -->',
    markers.end,
  ].join('\n');
}

/** `readme` with its section between `markers` replaced by `block`; throws without markers. */
export function replaceMarkedBlock(readme: string, markers: ReadmeMarkers, block: string): string {
  const start = readme.indexOf(markers.start);
  const end = readme.indexOf(markers.end);
  if (start < 0 || end < start) throw new Error(`README.md has no "${markers.start}" block`);
  return readme.slice(0, start) + block + readme.slice(end + markers.end.length);
}
