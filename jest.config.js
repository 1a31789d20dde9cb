// NestJS 12 ships as ES modules only; on Node 20 Jest can load them only in its native ESM
// mode (`--experimental-vm-modules`, see package.json "test:jest"), so TypeScript is
// transpiled to ESM here. Type checking is done once by `npm run typecheck`, not per file.
const { sqliteModuleName } = require('./scripts/sqlite-driver.cjs');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: '<rootDir>/test/support/jest-environment.cjs',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', useESM: true }],
  },
  roots: ['<rootDir>/lib', '<rootDir>/servers', '<rootDir>/test'],
  // The better-sqlite3 that works on this Node (scripts/sqlite-driver.cjs).
  moduleNameMapper: { '^better-sqlite3$': sqliteModuleName() },
  testMatch: ['**/*.spec.ts', '**/*.e2e-spec.ts'],
  testTimeout: 30000,
  // The slowest files first, from the committed table of their durations (see the file).
  testSequencer: '<rootDir>/test/support/test-sequencer.cjs',
  // Two test files at a time: most of the suite waits on servers, leases and child processes,
  // so one file per core fits the 20-minute CI budget; every file uses its own ports, key
  // prefixes, tables and temp dirs, so two never disturb each other's state.
  maxWorkers: 2,
  // A worker is replaced once its heap passes 500 MB after a file; without this they grew to
  // ~800 MB resident (every file's module registry). Traced (2026-11-25): Jest's end-of-run
  // "a worker process has failed to exit gracefully" is not a leaked handle. At Jest's end
  // message both workers had only their stdio and IPC pipes, emptied their event loops and
  // emitted 'exit' within 10 ms; the one force-killed 500 ms later was the larger (779 MB
  // resident against 439 MB), still being torn down (an 800 MB Node process takes 200-300 ms
  // to go here when quiet, process.exit or not). With this limit test/e2e ends without the
  // warning; the full suite may still print it once, when a worker near the limit ends on a
  // busy machine.
  workerIdleMemoryLimit: '500MB',
  // Every spec must close what it opens; a leaked handle fails loudly instead of hanging CI.
  detectOpenHandles: false,
  forceExit: false,
};
