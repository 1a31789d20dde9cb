// Which better-sqlite3 the repository's code loads on this Node (the sample app, tests, bench).
// No one major works on every supported line: 12.x aborts the process on Node 24 (its statement
// finalizer runs when Node's environment is already gone: `Assertion failed: (env) != nullptr`
// in RemoveEnvironmentCleanupHook, an upstream defect that 13's move to node-addon-api fixed),
// and 13 requires Node 22 (it segfaults on 20). So package.json installs 12 as `better-sqlite3`
// (the peer TypeORM 1.1 declares) and 13 as `better-sqlite3-node22`, and `require('better-sqlite3')`
// is pointed at the one that works: by scripts/ts-register.cjs in every process it starts, and by
// jest.config.js's moduleNameMapper inside Jest.
'use strict';

/** The package to load for `better-sqlite3` on the running Node. */
function sqliteModuleName() {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 22 ? 'better-sqlite3-node22' : 'better-sqlite3';
}

module.exports = { sqliteModuleName };
