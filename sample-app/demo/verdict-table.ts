/** A plain-text table: a header row, right-aligned numbers, left-aligned text. */
export function renderTable(
  header: readonly string[],
  rows: ReadonlyArray<readonly (string | number)[]>,
): string {
  const cells = [header, ...rows].map((row) => row.map((cell) => String(cell)));
  const widths = header.map((_, col) => Math.max(...cells.map((row) => row[col].length)));
  const numeric = header.map((_, col) => rows.every((row) => typeof row[col] === 'number'));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, col) => (numeric[col] ? cell.padStart(widths[col]) : cell.padEnd(widths[col])))
      .join('  ')
      .trimEnd();
  const rule = widths.map((width) => '-'.repeat(width)).join('  ');
  return [line(cells[0]), rule, ...cells.slice(1).map(line)].join('\n');
}
