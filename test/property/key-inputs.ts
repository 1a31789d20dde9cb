/**
 * Generators of key inputs for the property tests: any Unicode, raw UTF-16 code units (lone
 * surrogates, NUL, controls), tricky pieces glued together, names that live on
 * `Object.prototype`, lengths around `MAX_KEY_LENGTH`, values that are not strings, and key
 * arrays with duplicates and too many keys. `KeyScale` keeps the expensive shapes rare on
 * real stores.
 */
import fc from 'fast-check';
import { MAX_KEY_LENGTH, MAX_KEYS } from '../../lib/core/settings/validation';

/** How big generated inputs may get (memory takes anything; a real store pays per key). */
export interface KeyScale {
  /** Longest key array of the common shapes (arrays around `MAX_KEYS` are drawn rarely). */
  readonly maxArray: number;
  /** Weight of keys around `MAX_KEY_LENGTH` and of megabyte keys (0: never). */
  readonly longWeight: number;
}

/** Memory: every shape, often. */
export const FULL_SCALE: KeyScale = { maxArray: 12, longWeight: 2 };
/** A real store: the same shapes, long keys and long arrays rarely. */
export const STORE_SCALE: KeyScale = { maxArray: 5, longWeight: 1 };

/** Names that a store or the engine could mistake for a property of an object. */
export const PROTOTYPE_NAMES = [
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'prototype',
  '__defineGetter__',
  'then',
] as const;

/**
 * Pieces that break naive key handling: separators and glob, path and template characters,
 * whitespace and controls, NUL, both halves of a surrogate pair apart and together, the
 * replacement and non-characters, composed and decomposed accents, an astral emoji.
 */
const PIECES = [
  'a',
  'A',
  ':',
  '/',
  '.',
  '..',
  '%2F',
  '*',
  '?',
  '[',
  '{',
  '}',
  '{0}',
  '{tag}',
  ',',
  ' ',
  '\t',
  '\n',
  '\r',
  '\u0000',
  '\u0001',
  '\u007f',
  '\u0085',
  '\u200b',
  '\u2028',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ufffd',
  '\ufffe',
  '\uffff',
  'é',
  'e\u0301',
  'ß',
  'İ',
  '🔒',
  '\u{10ffff}',
  "'",
  '"',
  '\\',
  '`',
  '$1',
];

/** Any UTF-16 code unit, lone surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));

/** Strings of exactly `length` code units made of one repeated piece (cut mid-pair at odd lengths). */
function ofLength(pieces: readonly string[], lengths: fc.Arbitrary<number>): fc.Arbitrary<string> {
  return fc
    .tuple(fc.constantFrom(...pieces), lengths)
    .map(([piece, n]) => piece.repeat(Math.ceil(n / piece.length)).slice(0, n));
}

/** Any key text, valid or not (strings only). */
export function keyText(scale: KeyScale): fc.Arbitrary<string> {
  const arbitraries: Array<fc.WeightedArbitrary<string>> = [
    { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 16 }), weight: 4 },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }), weight: 2 },
    { arbitrary: fc.string({ unit: codeUnit, maxLength: 8 }), weight: 3 },
    {
      arbitrary: fc
        .array(fc.constantFrom(...PIECES), { minLength: 1, maxLength: 6 })
        .map((p) => p.join('')),
      weight: 6,
    },
    { arbitrary: fc.constantFrom(...PROTOTYPE_NAMES), weight: 2 },
  ];
  if (scale.longWeight > 0) {
    const nearMax = fc.integer({ min: MAX_KEY_LENGTH - 3, max: MAX_KEY_LENGTH + 3 });
    arbitraries.push(
      {
        arbitrary: ofLength(['k', 'é', '🔒', 'ab\u0000', '\ud800'], nearMax),
        weight: scale.longWeight,
      },
      { arbitrary: ofLength(['x'], fc.constant(1_000_000)), weight: 1 },
    );
  }
  return fc.oneof(...arbitraries);
}

/** Key inputs that are not strings at all (refused whatever the backend). */
export const notAString: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, true, 0, -0, NaN, Infinity, 42, [], {}, ['a', ['b']]),
  fc.bigInt(),
  fc.double(),
  fc.constant(Symbol('key')),
  fc.constant(() => 'key'),
  fc.constant(new String('boxed')),
  fc.constant(new Date(0)),
  fc.object({ maxDepth: 1 }),
);

/** A key or key list for acquire/tryAcquire/withLock: mostly strings, some arrays, some junk. */
export function keyInput(scale: KeyScale): fc.Arbitrary<unknown> {
  const text = keyText(scale);
  // A small pool, so arrays hold duplicates often.
  const pooled = fc.constantFrom('a', 'b', 'A', 'é', 'e\u0301', '__proto__', 'a ');
  const element = fc.oneof(
    { arbitrary: pooled, weight: 6 },
    { arbitrary: text, weight: 3 },
    { arbitrary: notAString, weight: 1 },
  );
  return fc.oneof(
    { arbitrary: text, weight: 14 },
    { arbitrary: notAString, weight: 1 },
    { arbitrary: fc.array(element, { maxLength: scale.maxArray }), weight: 4 },
    {
      arbitrary: fc.array(fc.oneof(pooled, fc.string({ unit: 'binary', minLength: 1 })), {
        minLength: MAX_KEYS - 1,
        maxLength: MAX_KEYS + 2,
      }),
      weight: 1,
    },
  );
}

/**
 * Pairs of different valid-looking keys that a store could merge: Unicode normalization forms,
 * case, trailing or leading space, the replacement character against what it replaces, one
 * a prefix of the other, and the lone surrogates of the issue (refused, so never merged).
 */
export function nearKeyPair(scale: KeyScale): fc.Arbitrary<readonly [string, string]> {
  const variants: Array<(s: string) => string> = [
    (s) => s.normalize('NFC'),
    (s) => s.normalize('NFD'),
    (s) => s.normalize('NFKC'),
    (s) => s.toUpperCase(),
    (s) => s.toLowerCase(),
    (s) => `${s} `,
    (s) => ` ${s}`,
    (s) => `${s}\t`,
    (s) => `${s}\ufffd`,
    (s) => `${s}\ud800`,
    (s) => `${s}x`,
    (s) => s.slice(0, -1),
    (s) => `${s}\u200b`,
    (s) => s.replace(/[^\x20-\x7e]/gu, '?'),
  ];
  return fc
    .tuple(keyText(scale), fc.constantFrom(...variants.keys()), fc.constantFrom(...variants.keys()))
    .map(([s, i, j]) => [variants[i](s), variants[j](s)] as const);
}
