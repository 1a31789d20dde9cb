/**
 * Generators of `LockModule.forRoot` options for the property tests, labelled like the call
 * options (`option-inputs.ts`): memory backends under valid and invalid names (`__proto__`,
 * `constructor`, spaces, 65 characters) with valid and invalid configurations, the default
 * backend, `defaults`, `keyPrefix`, `operationTimeout`, `shutdown`, `metrics` and the HTTP
 * options, each with wrong types, bad numbers, unknown fields and throwing getters.
 */
import fc from 'fast-check';
import { MIN_TTL_MS } from '../../lib/core/settings/validation';
import { keyText } from './key-inputs';
import {
  bad,
  duration,
  flag,
  good,
  optionsCase,
  show,
  waitTimeout,
  wrongType,
  verdicts,
  type Labelled,
  type OptionFields,
  type OptionsCase,
} from './option-inputs';

/** Longest `keyPrefix`, in UTF-16 code units (the module's documented limit). */
const MAX_PREFIX = 256;
/** What a backend name may be (the module's documented rule). */
const BACKEND_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** A generated module configuration, with what booting it must give. */
export interface ModuleCase {
  /** The options passed to `forRoot`. */
  readonly options: OptionsCase;
  /** Backend names, in configuration order (valid cases only). */
  readonly names: readonly string[];
  /** The backend a call without `backend` uses (valid cases only). */
  readonly defaultName?: string;
  /** The key prefix the stores see. */
  readonly keyPrefix: string;
  /** The default ttl. */
  readonly ttl: number;
}

/** A labelled nested options object (`defaults`, `shutdown`, `retryAfterSeconds`). */
interface Nested {
  readonly label: Labelled;
  readonly values: Readonly<Record<string, unknown>>;
}

function nested(field: string, fields: OptionFields): fc.Arbitrary<Nested> {
  const naming = { object: field, unknown: `${field}.`, known: `${field}.` };
  return optionsCase(fields, { naming }).map((c) => {
    const value = c.build();
    return {
      label: { value, ok: c.invalid.length === 0, faults: c.invalid, text: c.text },
      values: c.values,
    };
  });
}

/** Wrong types, but not null: the HTTP options read null as unset. */
const notNull = wrongType.filter((v) => v !== null);

/** An HTTP status option: 400-599, `false` or unset; anything else refused. */
const httpStatus: fc.Arbitrary<Labelled> = verdicts(
  [
    good(fc.constantFrom(undefined, null, false, 409, 423, 503)),
    good(fc.integer({ min: 400, max: 599 })),
  ],
  [
    bad(fc.constantFrom(399, 600, 409.5, 200, true, '409', NaN, Infinity, -409, 0, 409n)),
    bad(notNull),
  ],
);

/** `Retry-After` seconds: 0-86400 whole, `false` or unset; anything else refused. */
const retrySeconds: fc.Arbitrary<Labelled> = verdicts(
  [
    good(fc.constantFrom(undefined, null, false, 0, 86_400)),
    good(fc.integer({ min: 0, max: 86_400 })),
  ],
  [bad(fc.constantFrom(-1, 86_401, 1.5, true, '1', NaN, Infinity, 1n)), bad(notNull)],
);

/** `keyPrefix`: any text a key may hold, up to 256 code units (unset or null: none). */
const keyPrefix: fc.Arbitrary<Labelled> = fc
  .oneof(
    fc.constantFrom(undefined, null, '', 'app:', '\u0000', 'p\ud800', 'x'.repeat(MAX_PREFIX + 1)),
    fc.constant('é'.repeat(MAX_PREFIX)),
    keyText({ maxArray: 0, longWeight: 0 }),
    keyText({ maxArray: 0, longWeight: 0 }),
    wrongType,
  )
  .map((value) => ({ value, ok: prefixFault(value) === undefined, text: show(value) }));

function prefixFault(value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string' || value.length > MAX_PREFIX || value.includes('\u0000')) {
    return 'keyPrefix';
  }
  return Buffer.from(value, 'utf8').toString('utf8') === value ? undefined : 'keyPrefix';
}

/** A backend name, valid or not. */
const backendName = fc.oneof(
  {
    arbitrary: fc.constantFrom(
      'b',
      'main',
      'x-1.y_2',
      'a'.repeat(64),
      'constructor',
      'toString',
      'then',
    ),
    weight: 3,
  },
  { arbitrary: fc.stringMatching(/^[A-Za-z0-9_.-]{1,8}$/), weight: 3 },
  {
    arbitrary: fc.constantFrom('', 'a b', 'a'.repeat(65), 'é', '__proto__', 'a/b', 'a:b'),
    weight: 1,
  },
);

/** A backend configuration: a memory backend, or something that is not a valid one. */
function backendConfig(field: string): fc.Arbitrary<Labelled> {
  return fc.oneof(
    { arbitrary: good(fc.constant({ type: 'memory' })), weight: 8 },
    {
      arbitrary: fc.oneof(
        bad(fc.constantFrom(null, 'memory', 1, [{ type: 'memory' }])).map(at(field)),
        bad(fc.constant({ type: 'memory', url: 'redis://x' })).map(at(`${field}.url`)),
        bad(
          fc.constantFrom('nope', 'Memory', '__proto__', 'toString', 1n, Symbol('memory'), null),
        ).map((label) => ({ ...at(`${field}.type`)(label), value: { type: label.value } })),
        bad(fc.constant(null)).map(() => ({
          value: Object.defineProperty({}, 'type', {
            enumerable: true,
            get() {
              throw new Error('a getter of the caller threw');
            },
          }),
          ok: false,
          faults: [`${field}.type`],
          text: '{ type: get() { throw } }',
        })),
      ),
      weight: 1,
    },
  );
}

function at(field: string) {
  return (label: Labelled): Labelled => ({ ...label, faults: [field] });
}

/** One to three named backends, as one labelled `backends` object. */
const backends: fc.Arbitrary<{ label: Labelled; names: string[] }> = fc
  .oneof(
    { arbitrary: fc.uniqueArray(backendName, { minLength: 1, maxLength: 3 }), weight: 12 },
    { arbitrary: fc.constant<string[]>([]), weight: 1 },
  )
  .chain((names) =>
    fc
      .tuple(...names.map((name) => backendConfig(`backends.${name}`)))
      .map((configs) => ({ names, configs })),
  )
  .map(({ names, configs }) => {
    const value: Record<string, unknown> = {};
    const faults: string[] = names.length === 0 ? ['backends'] : [];
    names.forEach((name, i) => {
      // `__proto__` as an own key, as JSON.parse makes it.
      Object.defineProperty(value, name, { value: configs[i].value, enumerable: true });
      if (!BACKEND_NAME.test(name) || name === '__proto__') faults.push(`backends.${name}`);
      if (!configs[i].ok) faults.push(...(configs[i].faults ?? []));
    });
    const text = `{ ${names.map((n, i) => `${JSON.stringify(n)}: ${configs[i].text}`).join(', ')} }`;
    return { label: { value, ok: faults.length === 0, faults, text }, names };
  });

/** `defaultBackend` for `names`: one of them, or (with one backend) none; else refused. */
function defaultBackend(names: readonly string[]): fc.Arbitrary<Labelled> {
  const accepted = names.length > 0 ? [good(fc.constantFrom(...names))] : [];
  if (names.length === 1) accepted.push(good(fc.constant(undefined)));
  const refused = [bad(fc.constantFrom('nope', '', 1n, null, Symbol('b')))];
  if (names.length !== 1) refused.push(bad(fc.constant(undefined)));
  return accepted.length > 0 ? verdicts(accepted, refused) : fc.oneof(...refused);
}

/**
 * Module options over memory backends: `backends` always given; the other fields at random,
 * sometimes wrong, as own properties (Nest copies the options by their own keys, so inherited
 * ones are ignored).
 */
export const moduleCase: fc.Arbitrary<ModuleCase> = fc
  .record({
    backends,
    defaults: nested('defaults', {
      ttl: duration(MIN_TTL_MS, fc.constantFrom(0, 1, 99.5, -1)),
      waitTimeout,
      autoRenew: flag,
      maxHold: duration(600_000, fc.constantFrom(0, -1)),
    }),
    shutdown: nested('shutdown', {
      // null means unset here, as for keyPrefix and the HTTP statuses.
      inFlight: fc.oneof(
        good(fc.constantFrom(undefined, null, 'finish', 'abort')),
        bad(fc.constantFrom('Finish', '', 1, false)),
      ),
      timeout: duration(1_000, fc.constantFrom(0, -1)),
    }),
    retryAfterSeconds: nested('retryAfterSeconds', {
      notAcquired: retrySeconds,
      unavailable: retrySeconds,
    }),
  })
  .chain((parts) =>
    optionsCase(
      {
        backends: fc.constant(parts.backends.label),
        defaultBackend: defaultBackend(parts.backends.names),
        defaults: fc.constant(parts.defaults.label),
        keyPrefix,
        operationTimeout: duration(1_000, fc.constantFrom(0, -1, NaN)),
        shutdown: fc.constant(parts.shutdown.label),
        metrics: flag,
        notAcquiredHttpStatus: httpStatus,
        unavailableHttpStatus: httpStatus,
        retryAfterSeconds: fc.constant(parts.retryAfterSeconds.label),
      },
      {
        naming: { object: 'options', unknown: '', known: '' },
        inherited: false,
        exotic: false,
        // With several backends, leaving defaultBackend out is a fault its label must judge.
        always: parts.backends.names.length > 1 ? ['backends', 'defaultBackend'] : ['backends'],
        maxFields: 5,
      },
    ).map((options): ModuleCase => {
      const { values } = options;
      const defaults = values.defaults === parts.defaults.label.value ? parts.defaults.values : {};
      const names = parts.backends.names;
      return {
        options,
        names,
        defaultName: (values.defaultBackend as string | undefined) ?? names[0],
        keyPrefix: (values.keyPrefix as string | null | undefined) ?? '',
        // Read only when the case is valid (the ttl is then a number or unset).
        ttl: typeof defaults.ttl === 'number' ? Math.ceil(defaults.ttl) : 30_000,
      };
    }),
  );
