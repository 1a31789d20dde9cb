// Refreshes test/support/test-durations.json, the seconds each test file took, which
// test/support/test-sequencer.cjs reads to start the slowest files first. Reads the report of
// `npm test` (.tmp/jest-report.json, Jest's --json output; another path as the argument):
// files in the report get their new time, the others keep theirs, files that are gone are
// dropped. Times of one run on a busy machine are noisy; only the order matters, so one full
// run after adding, splitting or much slowing a file is enough.
//
// Run: npm run test:durations [-- report.json]
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const tableFile = path.join(root, 'test', 'support', 'test-durations.json');
const reportFile = path.resolve(process.argv[2] ?? path.join(root, '.tmp', 'jest-report.json'));

const report = JSON.parse(fs.readFileSync(reportFile, 'utf8'));
const table = fs.existsSync(tableFile) ? JSON.parse(fs.readFileSync(tableFile, 'utf8')) : {};
let updated = 0;
for (const result of report.testResults) {
  // Keyed by the path from the repo root, with forward slashes, as the sequencer looks it up.
  const file = path.relative(root, result.name).split(path.sep).join('/');
  if (file.startsWith('..') || !(result.endTime > result.startTime)) continue;
  table[file] = Math.round((result.endTime - result.startTime) / 100) / 10;
  updated++;
}
const kept = Object.entries(table)
  .filter(([file]) => fs.existsSync(path.join(root, file)))
  .sort(([fa, a], [fb, b]) => b - a || fa.localeCompare(fb));
fs.writeFileSync(tableFile, `${JSON.stringify(Object.fromEntries(kept), null, 2)}\n`);
console.log(
  `${path.relative(root, tableFile)}: ${updated} files from ${path.relative(root, reportFile)}, ${kept.length} in all`,
);
