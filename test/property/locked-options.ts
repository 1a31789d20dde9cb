/**
 * `@Locked` options tried at volume: each generated options object decorates a fresh class
 * (the decorator checks them at class definition) and, when accepted, the method is called. At
 * decoration it is accepted or refused with a `LockConfigError` naming the method and a field at
 * fault; at the call it runs under its lock, or is refused (a `signal` function returning no
 * signal) or aborted (an aborted signal) without running.
 */
import { randomUUID } from 'node:crypto';
import { expect } from '@jest/globals';
import fc from 'fast-check';
import { Locked } from '../../lib/decorators/locked.decorator';
import { LockConfigError } from '../../lib/errors/lock.errors';
import type { LockedOptions } from '../../lib/lock.interfaces';
import type { Outcome, PropertyTarget } from './call-checks';
import { checkLockedCall } from './locked-checks';
import { Gate } from './locked-jobs';
import {
  bad,
  duration,
  flag,
  good,
  lockAtLeastFor,
  optionsCase,
  sharing,
  verdicts,
  waitTimeout,
  wrongType,
  type Labelled,
  type OptionsCase,
} from './option-inputs';
import { MIN_TTL_MS } from '../../lib/core/settings/validation';

/** What the decorator is applied to. */
const WHERE = 'Decorated.run';

/** `@Locked` options: the lock options (but `signal`), `onBusy`, and `signal` as a function. */
export function lockedOptionsCase(configured: string): fc.Arbitrary<OptionsCase> {
  return optionsCase(
    {
      // Whether a name is configured is known only at the call; its type at decoration.
      backend: verdicts(
        [good(fc.constantFrom(undefined, configured))],
        [bad(fc.constantFrom(1, 1n, null, true, Symbol('b')))],
      ),
      ttl: duration(5_000, fc.constantFrom(0, 1, MIN_TTL_MS - 0.5, -1)),
      waitTimeout,
      autoRenew: flag,
      lockAtLeastFor,
      maxHold: duration(600_000, fc.constantFrom(0, -1)),
      ...sharing,
      onBusy: verdicts(
        [good(fc.constantFrom(undefined, 'throw', 'skip'))],
        [bad(fc.constantFrom('Skip', 'wait', '', 0, null, 1n, Symbol('skip')))],
      ),
      signal: verdicts(
        [
          good(
            fc.constantFrom(
              undefined,
              () => undefined,
              () => new AbortController().signal,
            ),
          ),
          fc.constant<Labelled>({
            value: () => AbortSignal.abort(),
            ok: true,
            aborted: true,
            text: '() => AbortSignal.abort()',
          }),
        ],
        [
          // A function is a signal option whatever it returns: that is judged at the call.
          bad(wrongType.filter((v) => typeof v !== 'function')),
          fc.constant<Labelled>({
            value: () => 'no signal',
            ok: false,
            atCall: true,
            text: "() => 'no signal'",
          }),
        ],
      ),
    },
    // The decorator copies its options by their own fields ({ ...options }): inherited ones are ignored.
    { inherited: false },
  );
}

/** Decorates a fresh class with `options`; the method, or what decorating threw. */
function decorate(t: PropertyTarget, options: unknown) {
  class Decorated {
    async run(_id: string, gate: Gate): Promise<string> {
      gate.runs++;
      gate.inside.resolve(t.locks.current());
      await gate.proceed.promise;
      return 'ran';
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(Decorated.prototype, 'run')!;
  try {
    Locked('dyn:{0}', options as LockedOptions)(Decorated.prototype, 'run', descriptor);
  } catch (err) {
    return { error: err };
  }
  Object.defineProperty(Decorated.prototype, 'run', descriptor);
  const instance = new Decorated();
  return { run: (id: string, gate: Gate) => instance.run(id, gate) };
}

/** Decorates with `c`, then (when accepted) calls the method once. */
export async function checkLockedOptions(t: PropertyTarget, c: OptionsCase): Promise<Outcome> {
  const before = t.calls.total();
  const decorated = decorate(t, c.build());
  if (c.invalid.length > 0) {
    if (!('error' in decorated))
      throw new Error(`decorating accepted options it must refuse (${c.invalid.join(', ')})`);
    if (!(decorated.error instanceof LockConfigError)) {
      throw new Error(
        `decorating threw ${String(decorated.error)}; expected a LockConfigError naming ${c.invalid.join(' or ')}`,
        {
          cause: decorated.error,
        },
      );
    }
    expect(c.invalid).toContain(decorated.error.field);
    expect(decorated.error.where).toBe(`@Locked on ${WHERE}`);
    expect(t.calls.total()).toBe(before);
    return 'refused';
  }
  if ('error' in decorated)
    throw new Error(`decorating refused valid options: ${String(decorated.error)}`, {
      cause: decorated.error,
    });
  const id = randomUUID();
  return checkLockedCall(
    t,
    WHERE,
    (gate) => decorated.run(id, gate),
    c.callInvalid.length > 0
      ? { faults: c.callInvalid }
      : c.aborted
        ? { aborted: true }
        : { keys: [`dyn:${id}`] },
    Number(c.values.lockAtLeastFor ?? 0),
  );
}
