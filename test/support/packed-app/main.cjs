// A user's app, in plain CommonJS, run from a temp folder where `nestjs-distributed-lock` was
// installed from its `npm pack` tarball with only ioredis as backend peer. Copied there and run
// by test/e2e/npm-pack.e2e-spec.ts as `node main.cjs redis <keyPrefix> <redisUrl>` or
// `node main.cjs missing-peer <keyPrefix> '<JSON array of backend configs>'`.
// Prints one JSON line; exits non-zero on any unexpected error.
'use strict';

require('reflect-metadata');
// NestJS 12 is ESM-only: Node >= 20.19 loads it through require(esm), as any CommonJS app would.
const { Inject, Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { LockModule, LockService, Locked, LockConfigError } = require('nestjs-distributed-lock');

const [mode, keyPrefix, arg] = process.argv.slice(2);

/** What TypeScript's `__decorate` does for a method decorator, without a compiler. */
function decorateMethod(decorators, target, name) {
  const descriptor = Object.getOwnPropertyDescriptor(target, name);
  Object.defineProperty(target, name, Reflect.decorate(decorators, target, name, descriptor));
}

class Inventory {
  constructor(locks) {
    this.locks = locks;
  }

  /** Holds `stock:<sku>` until `gate` settles; `entered` tells the caller it is inside. */
  async deduct(sku, entered, gate) {
    const lock = this.locks.current();
    entered();
    await gate;
    return { key: lock.key, fence: lock.fence, held: lock.isHeld() };
  }
}
decorateMethod([Locked('stock:{0}', { waitTimeout: 5_000 })], Inventory.prototype, 'deduct');
Inject(LockService)(Inventory, undefined, 0);
Injectable()(Inventory);

function appModule(backends) {
  class AppModule {}
  Module({
    imports: [LockModule.forRoot({ backends, keyPrefix })],
    providers: [Inventory],
  })(AppModule);
  return AppModule;
}

/** A promise plus its resolve, to hold a lock scope open while a concurrent attempt is made. */
function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

async function runRedis() {
  const app = await NestFactory.createApplicationContext(
    appModule({ main: { type: 'redis', url: arg } }),
    { logger: false, abortOnError: false },
  );
  try {
    const locks = app.get(LockService);
    const inventory = app.get(Inventory);

    // @Locked: while the method holds the key, an attempt from outside its scope is refused.
    const entered = deferred();
    const gate = deferred();
    const running = inventory.deduct('sku-1', entered.resolve, gate.promise);
    await entered.promise;
    const lockedBusyTry = await locks.tryAcquire('stock:sku-1');
    const lockedIsLocked = await locks.isLocked('stock:sku-1');
    gate.resolve();
    const locked = await running;

    // withLock on the same key: fences keep growing across grants.
    const inside = deferred();
    const release = deferred();
    const scoped = locks.withLock('stock:sku-1', async (lock) => {
      inside.resolve();
      await release.promise;
      return lock.fence;
    });
    await inside.promise;
    // The held lock lives in Redis under our prefix...
    const heldKeys = (await redisKeysWithPrefix(false)).length;
    const withLockBusyTry = await locks.tryAcquire('stock:sku-1');
    release.resolve();
    const withLockFence = await scoped;
    const secondFence = await locks.withLock('stock:sku-1', (lock) => lock.fence);
    const freeAfter = !(await locks.isLocked('stock:sku-1'));

    return {
      locked,
      lockedBusyTryRefused: lockedBusyTry === null,
      lockedIsLocked,
      fences: [locked.fence, withLockFence, secondFence],
      withLockBusyTryRefused: withLockBusyTry === null,
      freeAfter,
      heldKeys,
      // ...and once released only fence bucket counters are left under it (shared by buckets of
      // keys, not one per lock key); deletes every leftover for the test.
      leftoverKeys: await redisKeysWithPrefix(true),
    };
  } finally {
    await app.close();
  }
}

/** Keys under this run's prefix, listed (and with `remove`, deleted) with the app's own ioredis. */
async function redisKeysWithPrefix(remove) {
  const Redis = require('ioredis');
  const redis = new Redis(arg, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys = [];
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `*${keyPrefix}*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    if (remove && keys.length > 0) await redis.del(...keys);
    return keys;
  } finally {
    redis.disconnect();
  }
}

/** Bootstraps once per backend config (each needs a peer that is not installed); reports the errors. */
async function runMissingPeer() {
  const results = [];
  for (const config of JSON.parse(arg)) {
    const error = await NestFactory.createApplicationContext(appModule({ only: config }), {
      logger: false,
      abortOnError: false,
    }).then(
      async (app) => {
        await app.close();
        return null;
      },
      (err) => err,
    );
    results.push({
      type: config.type,
      isLockConfigError: error instanceof LockConfigError,
      code: error ? error.code : null,
      message: error ? error.message : null,
    });
  }
  return results;
}

const modes = { redis: runRedis, 'missing-peer': runMissingPeer };
if (!modes[mode] || !keyPrefix || !arg) {
  console.error('usage: node main.cjs <redis|missing-peer> <keyPrefix> <redisUrl|configs>');
  process.exit(2);
}
modes[mode]().then(
  (result) => console.log(JSON.stringify(result)),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
