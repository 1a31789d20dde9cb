/**
 * Bad input tried at volume (issue 17, item 9): random keys, option objects and `@Locked`
 * arguments thrown at the public API of one backend configuration, with fast-check (each
 * failure shrunk to a minimal input, printed with the seed that replays it). Every input either
 * works or is refused with `LockConfigError` before any store call; nothing hangs, throws
 * anything else, or leaves a lock behind. Run on memory with many inputs and on every real
 * store with fewer (`test/property/*.spec.ts`).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import { MAX_KEY_LENGTH, MIN_TTL_MS } from '../../lib/core/settings/validation';
import { MAX_TIMER_MS } from '../../lib/core/shared/timers';
import { LockConfigError } from '../../lib/errors/lock.errors';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { countBackendCalls } from '../support/lock-checks';
import {
  checkKeyPair,
  checkLockCall,
  checkQueryCall,
  expectNothingHeld,
  type LockCall,
  type Outcome,
  type PropertyTarget,
  type QueryCall,
} from './call-checks';
import { keyInput, nearKeyPair, type KeyScale } from './key-inputs';
import { checkByFunction, checkTemplated } from './locked-checks';
import { KeyFunctionFailure, LockedJobs, templateArg, templateHolder } from './locked-jobs';
import { checkLockedOptions, lockedOptionsCase } from './locked-options';
import { fixedOptions, lockOptionFields, optionsCase, queryOptionFields } from './option-inputs';

/** One backend configuration and how hard to try it. */
export interface InputPropertyTarget {
  /** Label in `describe()`. */
  readonly name: string;
  /** A fresh backend configuration (and what removes its server or table afterwards). */
  setup(): Promise<{ config: LockBackendConfig; teardown?: () => Promise<void> }>;
  /** Inputs per property. */
  readonly runs: number;
  /** How big generated keys and key arrays get. */
  readonly scale: KeyScale;
  /** Longest one call may take before it counts as a hang. */
  readonly callMs: number;
  /** Most locks the backend holds at once with `config` (default: no limit); see `PropertyTarget`. */
  readonly capacity?: (config: LockBackendConfig) => number;
  /**
   * Also decorate fresh classes with random `@Locked` options and call them (they lock through
   * the most recently initialised module, so only in a file with one app).
   */
  readonly decoratorOptions?: boolean;
  /**
   * Called at the end with the run's key prefix: checks the store holds no lock of the run
   * and removes what the run left by design (fence counters), where the store keeps any.
   */
  readonly leftovers?: (keyPrefix: string) => Promise<void>;
}

/** The backend's name in every property app. */
const BACKEND = 'b';
/** Longest one property may take (all its inputs); each call is bounded on its own too. */
const PROPERTY_MS = 180_000;
/** Least share of a property's inputs that must work, and that must be refused. */
const MIN_SHARE = 0.1;

/** Declares the properties (and the issue's hand-found inputs) for one backend configuration. */
export function runInputProperties(target: InputPropertyTarget): void {
  describe(`bad input at volume: ${target.name}`, () => {
    const keyPrefix = `prop-${randomUUID().slice(0, 8)}:`;
    const tried = new Map<string, Map<Outcome, number>>();
    let app: LockTestApp;
    let t: PropertyTarget;
    let jobs: LockedJobs;
    let teardown: (() => Promise<void>) | undefined;
    let config: LockBackendConfig;
    let startedAt = 0;

    beforeAll(async () => {
      startedAt = performance.now();
      const created = await target.setup();
      teardown = created.teardown;
      config = created.config;
      app = await createLockApp(
        // The engine's bound on one store call is the property's own bound on a whole call:
        // with the 5 s default, a machine starved by the rest of the suite (an over-capacity
        // multi-key call makes ~150 round trips on a session store) turned a slow answer into
        // a store failure; a call that really hangs still fails the property at callMs.
        { backends: { [BACKEND]: created.config }, keyPrefix, operationTimeout: target.callMs },
        { providers: [LockedJobs] },
      );
      const backend = app.manager.getBackend(BACKEND);
      t = {
        locks: app.locks,
        backend,
        name: BACKEND,
        calls: countBackendCalls(backend),
        callMs: target.callMs,
        capacity: target.capacity?.(created.config) ?? Infinity,
      };
      jobs = app.app.get(LockedJobs);
    }, 60_000);

    afterAll(async () => {
      t?.calls.restore();
      try {
        await app?.close();
        await target.leftovers?.(keyPrefix);
      } finally {
        await teardown?.();
      }
      const counts = [...tried].map(([label, outcomes]) => {
        const parts = [...outcomes].map(([outcome, n]) => `${n} ${outcome}`);
        return { label, n: [...outcomes.values()].reduce((a, b) => a + b, 0), parts };
      });
      const seconds = ((performance.now() - startedAt) / 1000).toFixed(1);
      console.log(
        `bad input at volume, ${target.name}: ${counts.reduce((a, c) => a + c.n, 0)} inputs in ` +
          `${seconds} s\n${counts.map((c) => `  ${c.label}: ${c.n} (${c.parts.join(', ')})`).join('\n')}`,
      );
    }, 60_000);

    /**
     * Runs the property `target.runs` times (`examples` first), counting how each input ended;
     * a property whose inputs almost all work, or almost all are refused, would prove little.
     */
    async function check<T>(
      label: string,
      inputs: fc.Arbitrary<T>,
      predicate: (input: T) => Promise<Outcome>,
      examples: T[] = [],
    ): Promise<void> {
      const outcomes = new Map<Outcome, number>();
      tried.set(label, outcomes);
      const property = fc
        .asyncProperty(inputs, async (input) => {
          const outcome = await predicate(input);
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        })
        .afterEach(async () => expectNothingHeld(t));
      await fc.assert(property, {
        numRuns: target.runs,
        examples: examples.map((e) => [e]),
        reporter: report,
      });
      // fast-check counts the examples among numRuns.
      expect(outcomes.get('worked') ?? 0).toBeGreaterThan(target.runs * MIN_SHARE);
      expect(outcomes.get('refused') ?? 0).toBeGreaterThan(target.runs * MIN_SHARE);
    }

    const lockCalls = fc.constantFrom<LockCall>('acquire', 'tryAcquire', 'withLock');
    // isLocked more often: inspect and forceRelease are refused on a backend without them.
    const queryCalls = fc.oneof(
      { arbitrary: fc.constant<QueryCall>('isLocked'), weight: 2 },
      { arbitrary: fc.constantFrom<QueryCall>('inspect', 'forceRelease'), weight: 1 },
    );

    it(
      'acquire / tryAcquire / withLock: any key and options work or are refused before any I/O',
      async () => {
        await check(
          'lock calls',
          fc.tuple(
            lockCalls,
            keyInput(target.scale),
            optionsCase(lockOptionFields(BACKEND)),
            fc.boolean(),
          ),
          ([call, key, options, force]) => checkLockCall(t, call, key, options, force),
          [
            ['acquire', '__proto__', fixedOptions(undefined), true],
            ['tryAcquire', ['a', 'a', 'b'], fixedOptions({ lockAtLeastFor: 20 }), false],
            ['withLock', 'x'.repeat(MAX_KEY_LENGTH), fixedOptions({ ttl: MAX_TIMER_MS }), false],
          ],
        );
      },
      PROPERTY_MS,
    );

    it(
      'isLocked / inspect / forceRelease: any key and options answer "free" or are refused before any I/O',
      async () => {
        await check(
          'queries',
          fc.tuple(queryCalls, keyInput(target.scale), optionsCase(queryOptionFields(BACKEND))),
          ([call, key, options]) => checkQueryCall(t, call, key, options),
        );
      },
      PROPERTY_MS,
    );

    it(
      'different keys are different locks (normalization forms, case, spaces, U+FFFD)',
      async () => {
        await check('key pairs', nearKeyPair(target.scale), ([a, b]) => checkKeyPair(t, a, b), [
          ['é', 'e\u0301'],
          ['A', 'a'],
          ['a', 'a '],
          ['\ufffd', '\ud800'],
        ]);
      },
      PROPERTY_MS,
    );

    it(
      "@Locked('k:{0}:{1.a}'): any arguments lock the key they spell, or nothing runs",
      async () => {
        await check('@Locked template', fc.tuple(templateArg, templateHolder), ([a, b]) =>
          checkTemplated(t, jobs, a, b),
        );
      },
      PROPERTY_MS,
    );

    it(
      '@Locked(key function): any returned keys lock, or nothing runs; its own error passes through',
      async () => {
        const keys = fc.oneof(
          { arbitrary: keyInput(target.scale), weight: 9 },
          {
            arbitrary: fc.constant(null).map(() => new KeyFunctionFailure(new Error('bad dto'))),
            weight: 1,
          },
        );
        await check('@Locked key function', keys, (k) => checkByFunction(t, jobs, k));
      },
      PROPERTY_MS,
    );

    if (target.decoratorOptions) {
      it(
        '@Locked options: refused at class definition naming the method, or the method runs locked',
        async () => {
          await check('@Locked options', lockedOptionsCase(BACKEND), (c) =>
            checkLockedOptions(t, c),
          );
        },
        PROPERTY_MS,
      );
    }

    describe('the inputs issue 17 found by hand', () => {
      it("'\\ud800' and '\\udbff' are refused; '\\ufffd' is a lock of its own", async () => {
        const none = fixedOptions(undefined);
        for (const key of ['\ud800', '\udbff', 'a\udc00', '\ud800\ud800']) {
          await checkLockCall(t, 'acquire', key, none);
          await checkQueryCall(t, 'isLocked', key, none);
        }
        await checkKeyPair(t, '\ufffd', '\ud800\udc00');
        await checkKeyPair(t, '\ufffd', '\ufffe');
        await checkKeyPair(t, '\ufffd', '\ud800');
        await checkKeyPair(t, '\udbff', '\ufffd');
        // Held, U+FFFD does not make the lone surrogates that UTF-8 turns into it busy: they are refused.
        const held = await t.locks.acquire('\ufffd');
        for (const key of ['\ud800', '\udbff']) {
          await expect(t.locks.tryAcquire(key)).rejects.toBeInstanceOf(LockConfigError);
        }
        await held.release();
      });

      it('a key with NUL is refused before any I/O, and so is a keyPrefix with NUL', async () => {
        const none = fixedOptions(undefined);
        for (const key of ['\u0000', 'a\u0000b', ['ok', 'x\u0000']]) {
          await checkLockCall(t, 'tryAcquire', key, none);
          await checkLockCall(t, 'withLock', key, none);
        }
        for (const prefix of ['p\u0000', '\u0000', 'p\ud800']) {
          const failed = await createLockApp({
            backends: { [BACKEND]: config },
            keyPrefix: prefix,
          }).then(
            async (other) => {
              await other.close();
              return undefined;
            },
            (err: unknown) => err,
          );
          expect(failed).toBeInstanceOf(LockConfigError);
          expect(failed).toMatchObject({ field: 'keyPrefix' });
        }
      });

      it(`ttl 0.5, 1 and 99.5 are refused; ${MIN_TTL_MS} ms takes a free key`, async () => {
        const key = `ttl-${randomUUID()}`;
        for (const ttl of [0.5, 1, 99, 99.5]) {
          await checkLockCall(t, 'tryAcquire', key, fixedOptions({ ttl }, ['ttl']));
        }
        // The shortest lease still takes a free key (at 1 ms Redis and SQL read a free key as busy).
        const lock = await t.locks.tryAcquire(key, { ttl: MIN_TTL_MS });
        expect(lock).not.toBeNull();
        await lock!.release();
        expect(await t.locks.isLocked(key)).toBe(false);
      });

      it('withLock refuses a callback that is not a function, before any I/O', async () => {
        const before = t.calls.total();
        await expect(t.locks.withLock('k', 'not a function' as never)).rejects.toMatchObject({
          code: 'LOCK_CONFIG',
          field: 'fn',
        });
        expect(t.calls.total()).toBe(before);
      });
    });
  });
}

/**
 * Fails with fast-check's report, long strings in it cut short: a counterexample key of 16 384
 * characters would otherwise bury the report.
 */
function report<T>(details: fc.RunDetails<T>): void {
  if (!details.failed) return;
  const message = fc.defaultReportMessage(details) ?? 'property failed';
  throw new Error(
    message.replace(
      /"((?:[^"\\]|\\.){120})((?:[^"\\]|\\.){200,})"/g,
      (_all, head: string, rest: string) =>
        `"${head}…" (${head.length + rest.length} characters as printed)`,
    ),
    { cause: details.errorInstance },
  );
}
