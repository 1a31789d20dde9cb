/**
 * Generators of option objects for the property tests, each value labelled with what the rules
 * say of it (so the test needs no copy of the validation): wrong types, NaN, ±Infinity,
 * negative, huge and fractional numbers, extra fields (`__proto__` as an own key among them),
 * values inherited from a prototype, getters that throw, and things that are no object at all.
 * A case builds a fresh object for every call (getters and prototypes are not shared).
 */
import fc from 'fast-check';
import { MIN_TTL_MS } from '../../lib/core/settings/validation';
import { MAX_TIMER_MS } from '../../lib/core/shared/timers';

/** A value with its verdict: accepted (`ok`), or refused naming its field. */
export interface Labelled {
  readonly value: unknown;
  readonly ok: boolean;
  /** Accepted, but an already aborted signal: the call rejects with `LockAbortedError`. */
  readonly aborted?: boolean;
  /** Short text for a counterexample (values such as symbols and getters print poorly). */
  readonly text: string;
  /** Refused: the fields a refusal may name, when not the option's own name (nested options). */
  readonly faults?: readonly string[];
  /** Refused only when used, not when given (a `@Locked` signal function returning junk). */
  readonly atCall?: boolean;
}

/** Accepted values of `arb`. */
export function good(arb: fc.Arbitrary<unknown>): fc.Arbitrary<Labelled> {
  return arb.map((value) => ({ value, ok: true, text: show(value) }));
}

/** Refused values of `arb`. */
export function bad(arb: fc.Arbitrary<unknown>): fc.Arbitrary<Labelled> {
  return arb.map((value) => ({ value, ok: false, text: show(value) }));
}

/** Accepted and refused values, drawn three to one (so most option objects are valid). */
export function verdicts(
  accepted: ReadonlyArray<fc.Arbitrary<Labelled>>,
  refused: ReadonlyArray<fc.Arbitrary<Labelled>>,
): fc.Arbitrary<Labelled> {
  return fc.oneof(
    { arbitrary: fc.oneof(...accepted), weight: 3 },
    { arbitrary: fc.oneof(...refused), weight: 1 },
  );
}

/** Values of the wrong type for any number or boolean option. */
export const wrongType: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, 'x', '1000', '', [], [1000], {}, { valueOf: () => 1000 }),
  fc.bigInt(),
  fc.constant(Symbol('option')),
  fc.constant(() => 1000),
  fc.constant(new Number(1000)),
);

/** Numbers below zero (fast-check's doubles order -0 below 0, and -0 is no negative wait). */
const negative = fc
  .double({ max: 0, maxExcluded: true, noNaN: true })
  .filter((v) => !Object.is(v, -0));

/** Numbers that no duration accepts. */
const neverADuration = fc.constantFrom(NaN, -Infinity, Infinity, -1, -0.5, -Number.MAX_VALUE);

/**
 * A duration option (`ttl`, `maxHold`): accepted from `min` (timing-safe values only: the
 * property holds each lock a moment, so a shorter lease is tried in a plain test) up to
 * `MAX_TIMER_MS`; refused when `tooShort`, above `MAX_TIMER_MS`, non-finite or not a number.
 */
export function duration(min: number, tooShort: fc.Arbitrary<number>): fc.Arbitrary<Labelled> {
  return verdicts(
    [
      good(fc.constantFrom(undefined, MAX_TIMER_MS, min)),
      good(fc.integer({ min, max: MAX_TIMER_MS })),
      good(fc.double({ min, max: MAX_TIMER_MS, noNaN: true })),
    ],
    [
      bad(tooShort),
      bad(fc.constantFrom(MAX_TIMER_MS + 0.5, 1e300)),
      bad(neverADuration),
      bad(fc.double({ min: MAX_TIMER_MS, minExcluded: true, noNaN: true })),
      bad(wrongType),
    ],
  );
}

/** A ttl under `MIN_TTL_MS` (fractions included: 99.5 is under 100). */
const ttlTooShort = fc.oneof(
  fc.constantFrom(0, -0, 0.5, 1, MIN_TTL_MS - 1, MIN_TTL_MS - 0.01),
  fc.double({ max: MIN_TTL_MS, maxExcluded: true, noNaN: true }),
);

/** A duration that is not positive. */
const notPositive = fc.oneof(fc.constantFrom(0, -0), fc.double({ max: 0, noNaN: true }));

/** `waitTimeout`: any number from 0 to `Infinity`; negatives, NaN and non-numbers refused. */
export const waitTimeout: fc.Arbitrary<Labelled> = verdicts(
  [
    good(fc.constantFrom(undefined, 0, -0, 0.5, Infinity, 1e300)),
    good(fc.double({ min: 0, noNaN: true })),
  ],
  [bad(fc.constantFrom(NaN, -Infinity, -1, -Number.MIN_VALUE)), bad(negative), bad(wrongType)],
);

/** A boolean option (`autoRenew`). */
export const flag: fc.Arbitrary<Labelled> = verdicts(
  [good(fc.constantFrom(undefined, true, false))],
  [bad(fc.constantFrom(0, 1, 'true', 'false', null)), bad(wrongType)],
);

/**
 * `lockAtLeastFor`: 0 up to `MAX_TIMER_MS` (accepted values are kept short: the key then stays
 * taken that long after the release, which the property waits out); refused below 0, above
 * the timer limit, non-finite, or not a number.
 */
export const lockAtLeastFor: fc.Arbitrary<Labelled> = verdicts(
  [
    good(fc.constantFrom(undefined, 0, -0)),
    // Whole ms too: doubles in [0, 30] are mostly tiny, below the 1 ms a lock is kept for.
    good(fc.integer({ min: 1, max: 30 })),
    good(fc.double({ min: 0, max: 30, noNaN: true })),
  ],
  [
    bad(neverADuration),
    bad(fc.constantFrom(MAX_TIMER_MS + 1, 1e300)),
    bad(negative),
    bad(wrongType),
  ],
);

/** `signal`: an AbortSignal (a fresh one, or one already aborted), or something else. */
export const signal: fc.Arbitrary<Labelled> = verdicts(
  [
    good(fc.constant(undefined)),
    good(fc.constant(null).map(() => new AbortController().signal)),
    fc.constant(null).map((): Labelled => ({
      value: AbortSignal.abort(new Error('the caller gave up')),
      ok: true,
      aborted: true,
      text: 'AbortSignal.abort()',
    })),
  ],
  [
    bad(fc.constantFrom({}, { aborted: false }, { aborted: 'no', addEventListener: 1 })),
    bad(fc.constant(null).map(() => new AbortController())),
    bad(wrongType),
  ],
);

/** `backend`: the configured name, or a name or value that is none. */
export function backendName(configured: string): fc.Arbitrary<Labelled> {
  return verdicts(
    [good(fc.constantFrom(undefined, configured))],
    [
      bad(fc.constantFrom('nope', '', `${configured} `, configured.toUpperCase())),
      bad(fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty')),
      bad(
        fc.constantFrom(1, 1n, null, true, Symbol(configured), [configured], { [configured]: 1 }),
      ),
    ],
  );
}

/** The labelled values of each option a call accepts. */
export type OptionFields = Readonly<Record<string, fc.Arbitrary<Labelled>>>;

/**
 * `mode` and `permits` as every store accepts them (a mutex asked for explicitly: shared and
 * counted requests are refused by stores without the capability, which the conformance battery
 * checks) and as no store does (wrong types, out of range, fractions).
 */
export const sharing: OptionFields = {
  mode: verdicts(
    [good(fc.constantFrom(undefined, 'exclusive'))],
    [bad(fc.constantFrom('read', 'SHARED', 'Exclusive', '', 1, null, true, Symbol('shared')))],
  ),
  permits: verdicts(
    [good(fc.constantFrom(undefined, 1))],
    [bad(fc.constantFrom(0, -1, 1.5, 1025, NaN, Infinity, '2', null, 2n, [2]))],
  ),
};

/** `LockOptions` of `acquire`/`tryAcquire`/`withLock` on a backend named `configured`. */
export function lockOptionFields(configured: string): OptionFields {
  return {
    backend: backendName(configured),
    ttl: duration(5_000, ttlTooShort),
    waitTimeout,
    autoRenew: flag,
    lockAtLeastFor,
    signal,
    maxHold: duration(600_000, notPositive),
    ...sharing,
  };
}

/** The options of `isLocked`/`inspect`/`forceRelease`: `backend` only. */
export function queryOptionFields(configured: string): OptionFields {
  return { backend: backendName(configured) };
}

/** Where a generated field goes on the options object. */
type Placement = 'own' | 'getter' | 'inherited' | 'inherited-getter';

/** One generated field: its name, labelled value and placement. */
interface Entry {
  readonly name: string;
  readonly label: Labelled;
  readonly placement: Placement;
}

/** The outer shape: an object (plain or without prototype), absent, or no options object. */
type Shape =
  | { readonly kind: 'plain' | 'null-prototype' | 'absent' | 'proxy-throws' }
  | { readonly kind: 'not-an-object'; readonly value: unknown };

/** A generated options argument and what the call must do with it. */
export interface OptionsCase {
  /** A fresh options value (getters, prototypes and proxies are built anew each time). */
  build(): unknown;
  /** Fields a refusal may name; empty when the options are valid. */
  readonly invalid: readonly string[];
  /** Valid, with an already aborted signal. */
  readonly aborted: boolean;
  /** Fields refused only when the options are used (`@Locked`: at the call, not at decoration). */
  readonly callInvalid: readonly string[];
  /** The effective value of each known field (`undefined`: unset). */
  readonly values: Readonly<Record<string, unknown>>;
  /** Printed in counterexamples. */
  readonly text: string;
}

const GETTER_ERROR = 'a getter of the caller threw';

/** How a call names the fields of its options object in a `LockConfigError`. */
export interface Naming {
  /** The object itself (not an object, unreadable). */
  readonly object: string;
  /** Prefix of an unknown field, and of a known one whose read throws. */
  readonly unknown: string;
  /** Prefix of a known field with a bad value. */
  readonly known: string;
}

/** `LockOptions` and the options of the queries: `options`, `options.<typo>`, `ttl`. */
export const CALL_NAMING: Naming = { object: 'options', unknown: 'options.', known: '' };

/** How the generated object is read. */
export interface OptionsShape {
  readonly naming?: Naming;
  /**
   * Whether inherited fields count (property reads see them), or are ignored (the object is
   * copied by its own keys first, as Nest does with module options).
   */
  readonly inherited?: boolean;
  /** Whether the argument may be missing or no object at all. */
  readonly exotic?: boolean;
  /** Fields always given (as own properties, before the random ones, which may override them). */
  readonly always?: readonly string[];
  /** Most random fields. */
  readonly maxFields?: number;
}

/**
 * Option objects over `fields`: mostly valid or one field wrong; sometimes unknown fields
 * (typos, `__proto__`, `constructor`), inherited values, throwing getters, a proxy whose
 * traps throw, or no object at all.
 */
export function optionsCase(
  fields: OptionFields,
  {
    naming = CALL_NAMING,
    inherited = true,
    exotic = true,
    always = [],
    maxFields = 3,
  }: OptionsShape = {},
): fc.Arbitrary<OptionsCase> {
  const known = Object.keys(fields);
  const placement = fc.oneof(
    { arbitrary: fc.constant<Placement>('own'), weight: 12 },
    { arbitrary: fc.constantFrom<Placement>('inherited', 'getter', 'inherited-getter'), weight: 1 },
  );
  const knownEntry = fc.oneof(
    ...known.map((name) => fc.record({ name: fc.constant(name), label: fields[name], placement })),
  );
  const extraName = fc.oneof(
    fc.constantFrom('timeout', 'key', 'ttl ', 'TTL', 'onBusy', 'retries', '', '__proto__'),
    fc.constantFrom('constructor', 'toString', 'valueOf', 'hasOwnProperty'),
    fc.string({ maxLength: 6 }),
  );
  const extraEntry = fc.record({
    name: extraName.filter((n) => !known.includes(n)),
    label: good(fc.anything({ maxDepth: 1 })),
    placement,
  });
  const shapes: Array<fc.WeightedArbitrary<Shape>> = [
    { arbitrary: fc.constant({ kind: 'plain' as const }), weight: 12 },
    { arbitrary: fc.constant({ kind: 'null-prototype' as const }), weight: 2 },
  ];
  if (exotic) {
    shapes.push(
      { arbitrary: fc.constant({ kind: 'absent' as const }), weight: 2 },
      { arbitrary: fc.constant({ kind: 'proxy-throws' as const }), weight: 1 },
      {
        arbitrary: fc
          .constantFrom(null, 0, 'ttl', true, [], [{}], () => ({}), Symbol('options'), 1n)
          .map((value) => ({ kind: 'not-an-object' as const, value })),
        weight: 1,
      },
    );
  }
  return fc
    .record({
      given: fc.tuple(
        ...always.map((name) =>
          fc.record({
            name: fc.constant(name),
            label: fields[name],
            placement: fc.constant<Placement>('own'),
          }),
        ),
      ),
      entries: fc.array(knownEntry, { maxLength: maxFields }),
      extras: fc.oneof(
        { arbitrary: fc.constant([]), weight: 6 },
        { arbitrary: fc.array(extraEntry, { minLength: 1, maxLength: 2 }), weight: 1 },
      ),
      shape: fc.oneof(...shapes),
    })
    .map(({ given, entries, extras, shape }) =>
      toCase(known, [...given, ...entries, ...extras], shape, naming, inherited),
    );
}

/**
 * Judges the entries as they are read: own before inherited (when inherited ones count at
 * all), later before earlier.
 */
function toCase(
  known: readonly string[],
  entries: readonly Entry[],
  shape: Shape,
  naming: Naming,
  readsInherited: boolean,
): OptionsCase {
  const text = describeCase(entries, shape);
  if (shape.kind === 'absent') return printable({ build: () => undefined, invalid: [], text });
  if (shape.kind === 'not-an-object') {
    return printable({ build: () => shape.value, invalid: [naming.object], text });
  }
  if (shape.kind === 'proxy-throws') {
    return printable({
      build: () => hostileProxy(),
      invalid: [naming.object, ...known.map((name) => `${naming.unknown}${name}`)],
      text,
    });
  }
  const own = new Map<string, Entry>();
  const inherited = new Map<string, Entry>();
  for (const entry of entries) {
    (entry.placement.startsWith('inherited') ? inherited : own).set(entry.name, entry);
  }
  const invalid = new Set<string>();
  const callInvalid = new Set<string>();
  const values: Record<string, unknown> = {};
  let aborted = false;
  for (const name of known) {
    const entry = own.get(name) ?? (readsInherited ? inherited.get(name) : undefined);
    if (!entry) continue;
    if (entry.placement.endsWith('getter')) {
      invalid.add(`${naming.unknown}${name}`);
    } else {
      values[name] = entry.label.value;
      if (!entry.label.ok) {
        const faults = entry.label.atCall ? callInvalid : invalid;
        for (const fault of entry.label.faults ?? [`${naming.known}${name}`]) faults.add(fault);
      }
      if (entry.label.aborted) aborted = true;
    }
  }
  for (const [name] of own) if (!known.includes(name)) invalid.add(`${naming.unknown}${name}`);
  const nullPrototype = shape.kind === 'null-prototype';
  return printable({
    build: () => buildObject(own, inherited, nullPrototype),
    invalid: [...invalid],
    callInvalid: [...callInvalid],
    aborted: aborted && invalid.size === 0 && callInvalid.size === 0,
    values,
    text,
  });
}

/** An options case that prints as its `text` in a counterexample. */
export function printable(
  parts: Pick<OptionsCase, 'build' | 'invalid' | 'text'> & Partial<OptionsCase>,
): OptionsCase {
  const options: OptionsCase = { aborted: false, values: {}, callInvalid: [], ...parts };
  return Object.assign(options, { [fc.toStringMethod]: () => options.text });
}

function buildObject(
  own: ReadonlyMap<string, Entry>,
  inherited: ReadonlyMap<string, Entry>,
  nullPrototype: boolean,
): object {
  const base: object | null = nullPrototype ? null : Object.prototype;
  const proto = inherited.size > 0 ? define(Object.create(base) as object, inherited) : base;
  return define(Object.create(proto) as object, own);
}

/** Defines each entry as an enumerable own property (a data property, or a throwing getter). */
function define(target: object, entries: ReadonlyMap<string, Entry>): object {
  for (const { name, label, placement } of entries.values()) {
    Object.defineProperty(
      target,
      name,
      placement.endsWith('getter')
        ? {
            get() {
              throw new Error(GETTER_ERROR);
            },
            enumerable: true,
            configurable: true,
          }
        : { value: label.value, enumerable: true, writable: true, configurable: true },
    );
  }
  return target;
}

/** An object whose every trap throws. */
function hostileProxy(): object {
  const fail = (): never => {
    throw new Error('a proxy trap threw');
  };
  return new Proxy({}, { ownKeys: fail, get: fail, has: fail, getOwnPropertyDescriptor: fail });
}

function describeCase(entries: readonly Entry[], shape: Shape): string {
  if (shape.kind === 'not-an-object') return show(shape.value);
  if (shape.kind !== 'plain' && shape.kind !== 'null-prototype') return `<${shape.kind}>`;
  const fields = entries.map(({ name, label, placement }) => {
    const value = placement.endsWith('getter') ? 'get() { throw }' : label.text;
    return `${placement.startsWith('inherited') ? '(inherited) ' : ''}${JSON.stringify(name)}: ${value}`;
  });
  return `${shape.kind === 'null-prototype' ? '(null prototype) ' : ''}{ ${fields.join(', ')} }`;
}

/** A value printed for a counterexample. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'symbol' || typeof value === 'function') return String(value);
  if (value instanceof AbortSignal) return `AbortSignal(aborted: ${value.aborted})`;
  if (value instanceof AbortController) return 'AbortController';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** Options given as a literal, with the fields a refusal may name. */
export function fixedOptions(value: unknown, invalid: readonly string[] = []): OptionsCase {
  return printable({
    build: () => value,
    invalid,
    values: (value ?? {}) as Record<string, unknown>,
    text: show(value),
  });
}
