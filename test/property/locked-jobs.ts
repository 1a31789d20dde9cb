/**
 * `@Locked` methods for the property tests: a template reading an argument and a property of
 * another (`'k:{0}:{1.a}'`), and a key function returning whatever it is given (or throwing
 * it). Each method reports its lock through a gate and waits there, so the test can look at the
 * key from outside the method's scope (where another caller contends) before letting it finish.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import fc from 'fast-check';
import { Locked } from '../../lib/decorators/locked.decorator';
import type { Lock } from '../../lib/lock.interfaces';
import { LockService } from '../../lib/lock.service';
import { deferred, type Deferred } from '../support/async';

/** Where a method reports the lock it runs under, and what it waits for before returning. */
export class Gate {
  readonly inside: Deferred<Lock | undefined> = deferred<Lock | undefined>();
  readonly proceed: Deferred<void> = deferred();
  runs = 0;
}

/** Thrown by the key function when it is given one (an error of the caller's own code). */
export class KeyFunctionFailure {
  constructor(readonly error: Error) {}
}

/** The provider whose `@Locked` methods the properties call. */
@Injectable()
export class LockedJobs {
  constructor(private readonly locks: LockService) {}

  /** Locked on `k:{0}:{1.a}`. */
  @Locked('k:{0}:{1.a}')
  async templated(_a: unknown, _b: unknown, gate: Gate): Promise<string> {
    return this.run(gate);
  }

  /** Locked on what the key function returns: its argument as it is. */
  @Locked((keys: unknown) => {
    if (keys instanceof KeyFunctionFailure) throw keys.error;
    return keys as string | string[];
  })
  async byFunction(_keys: unknown, gate: Gate): Promise<string> {
    return this.run(gate);
  }

  private async run(gate: Gate): Promise<string> {
    gate.runs++;
    gate.inside.resolve(this.locks.current());
    await gate.proceed.promise;
    return 'ran';
  }
}

/**
 * Arguments for a key template: undefined, null, empty and brace-laden strings (a placeholder
 * in a value is never expanded again), NUL and lone surrogates, numbers (NaN, ±Infinity, -0),
 * bigints, booleans, symbols, functions, arrays and objects.
 */
export const templateArg: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }), weight: 6 },
  {
    arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 8 }).map((s) => `{${s}}`),
    weight: 2,
  },
  { arbitrary: fc.oneof(fc.integer(), fc.double(), fc.bigInt()), weight: 4 },
  {
    arbitrary: fc.constantFrom('', '{0}', '{1.a}', '}{', 'a:{0}', '\u0000', '\ud800', 'é'),
    weight: 2,
  },
  {
    arbitrary: fc.constantFrom(0, -0, NaN, Infinity, -Infinity, 1.5, Number.MIN_VALUE),
    weight: 1,
  },
  {
    arbitrary: fc.oneof(
      fc.constantFrom(undefined, null, true, false, Symbol('arg'), () => 'fn'),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.object({ maxDepth: 1 }),
    ),
    weight: 2,
  },
);

/** The second argument, read at `.a`: mostly an object holding `a`, sometimes anything. */
export const templateHolder: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.record({ a: templateArg }), weight: 4 },
  { arbitrary: templateArg.map((a) => Object.create({ a }) as unknown), weight: 1 },
  { arbitrary: templateArg, weight: 2 },
);
