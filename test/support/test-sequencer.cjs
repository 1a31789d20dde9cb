// The order Jest starts test files in (jest.config.js `testSequencer`): the slowest first, from
// the durations committed in test/support/test-durations.json (refreshed by
// `npm run test:durations` from a full run's report). Jest's own order needs timings cached by an
// earlier run on the same machine; a fresh clone (CI) has none, and Jest then orders by file
// size, so a short file that drives minutes of cells could start last and run alone at the end.
// Longest first, two workers end close together.
//
// A file missing from the table (a new one) starts before every recorded one, in Jest's own
// order, as Jest itself does with files it has no time for: it may be long.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const durations = require('./test-durations.json');

class SlowestFirst extends Sequencer {
  sort(tests) {
    const seconds = (test) =>
      durations[path.relative(test.context.config.rootDir, test.path).split(path.sep).join('/')];
    const jestOrder = super.sort(tests);
    const unknown = jestOrder.filter((test) => seconds(test) === undefined);
    const known = jestOrder
      .filter((test) => seconds(test) !== undefined)
      .sort((a, b) => seconds(b) - seconds(a));
    return [...unknown, ...known];
  }
}

module.exports = SlowestFirst;
