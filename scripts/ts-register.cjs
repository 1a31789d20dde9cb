// Lets worker processes run the TypeScript sources directly: each .ts file is transpiled to
// CommonJS on load (no type check; `npm test` type-checks separately). NestJS 12 itself is ESM
// and is loaded through Node's require(esm).
//
// The tests start hundreds of such processes; loading the compiler and transpiling the library
// cost each one about a second of CPU. Outputs are therefore cached on disk, keyed by the
// source, the options and the compiler's version, and `typescript` is loaded only on a miss.
const crypto = require('node:crypto');
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const { sqliteModuleName } = require('./sqlite-driver.cjs');

const COMPILER_OPTIONS = {
  module: 'CommonJS',
  target: 'ES2022',
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  inlineSourceMap: true,
};
const CACHE_DIR = path.join(__dirname, '..', 'node_modules', '.cache', 'ts-register');
const TS_VERSION = require('typescript/package.json').version;

let ts;
let cacheUsable = true;

function transpile(source, filename) {
  ts ??= require('typescript');
  return ts.transpileModule(source, {
    fileName: filename,
    compilerOptions: {
      ...COMPILER_OPTIONS,
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
    },
  }).outputText;
}

function cached(source, filename) {
  // The file name is in the key: it is written into the inline source map.
  const key = crypto
    .createHash('sha256')
    .update(`${TS_VERSION}\0${JSON.stringify(COMPILER_OPTIONS)}\0${filename}\0${source}`)
    .digest('hex');
  const file = path.join(CACHE_DIR, `${key}.js`);
  if (cacheUsable) {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch {
      // a miss: compiled below
    }
  }
  const output = transpile(source, filename);
  if (cacheUsable) {
    try {
      fs.mkdirSync(CACHE_DIR, { recursive: true });
      // Written under a unique name and renamed: a concurrent reader sees all of it or nothing.
      const temp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
      fs.writeFileSync(temp, output);
      fs.renameSync(temp, file);
    } catch {
      cacheUsable = false; // a read-only checkout: compile every time, as before
    }
  }
  return output;
}

require.extensions['.ts'] = function compileTs(module, filename) {
  module._compile(cached(fs.readFileSync(filename, 'utf8'), filename), filename);
};

// better-sqlite3 that works on this Node (see sqlite-driver.cjs), for TypeORM's require and ours.
const sqlite = sqliteModuleName();
if (sqlite !== 'better-sqlite3') {
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function resolveSqlite(request, ...rest) {
    return resolve.call(this, request === 'better-sqlite3' ? sqlite : request, ...rest);
  };
}
