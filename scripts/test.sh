#!/usr/bin/env bash
# The whole test suite: make sure the servers it needs are there (installing them as root),
# then type check, lint, build (the package is tested as users load it),
# then every Jest project, slowest files first (bounded at 40 minutes, so a leaked handle can
# never hang CI; on this 2-core machine Jest took 11-13 minutes quiet, 17 beside other load,
# and 17-21 minutes on the slower days of November 2026, when the old 24-minute bound left too
# little room: a passing suite killed at the bound would fail CI for the machine's speed).
# Ends with one "N passed, N failed, N skipped" line.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== services"; bash scripts/ensure-services.sh
echo "== typecheck"; npx tsc -p tsconfig.json --noEmit
echo "== lint"; npx eslint . && npx prettier --check . >/dev/null
echo "== build"; npm run build --silent

mkdir -p .tmp
report=.tmp/jest-report.json
rm -f "$report"
status=0
timeout --kill-after=10 2400 node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js \
  --json --outputFile="$report" "$@" || status=$?

if [[ -f "$report" ]]; then
  node -e '
    const r = require(process.argv[1]);
    const skipped = r.numPendingTests + r.numTodoTests;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed` + (skipped ? `, ${skipped} skipped` : ""));
    if (r.numTotalTests === 0) { console.error("no test ran"); process.exit(1); }
    if (skipped > 0) { console.error("skipped tests are not allowed: a skipped test is not a passing test"); process.exit(1); }
  ' "$PWD/$report" || status=1
else
  echo "0 passed, 1 failed"
  status=1
fi
exit "$status"
