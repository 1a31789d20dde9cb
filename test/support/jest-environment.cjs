// Jest 29 runs each test file in a fresh VM realm whose `Symbol` lacks the `asyncDispose` /
// `dispose` symbols that Node 20 adds to the main realm. Code under test keys
// `[Symbol.asyncDispose]` on them, so hand the realm the main realm's symbols (primitives,
// shareable across realms) — otherwise `await using` would work in Node but not under Jest.
const { TestEnvironment } = require('jest-environment-node');

class NodeWithDisposables extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of ['dispose', 'asyncDispose']) {
      if (Symbol[name] && !this.global.Symbol[name]) {
        Object.defineProperty(this.global.Symbol, name, { value: Symbol[name] });
      }
    }
  }
}

module.exports = NodeWithDisposables;
