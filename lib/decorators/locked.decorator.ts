import 'reflect-metadata';
import { LockConfigError, LockNotAcquiredError } from '../errors/lock.errors';
import { compileLockKey, type LockKeySource } from '../core/settings/key-template';
import { checkSignal, validateLockOptions } from '../core/settings/validation';
import { copyOwnOptions, describe } from '../core/shared/options';
import type { LockedOptions, LockOptions } from '../lock.interfaces';
import { declareLocked, lockServiceFor } from '../lock-service.holder';
import { type AnyMethod, copyIdentity, describeMethod } from './method-identity';

/**
 * Runs the decorated method under a distributed lock: acquired before, renewed during,
 * released after (on resolve or reject; the method's own error is rethrown unchanged).
 * `key` is a template (`'stock:{0}'`, `'order:{0.id}'`) or a function of the arguments
 * returning a key or an array of keys (multi-lock, all or none). Works on providers,
 * controllers, `@Cron` and message handlers; the method becomes async. Fails closed: if
 * `LockModule` is not initialised, or the key does not resolve, the method does not run.
 * Every configuration error names the decorated method.
 */
export function Locked<A extends unknown[] = unknown[]>(
  key: LockKeySource<A>,
  options: LockedOptions<A> = {},
): MethodDecorator {
  return (target: object, propertyKey: string | symbol, descriptor: PropertyDescriptor) => {
    const where = `@Locked on ${describeMethod(target, propertyKey)}`;
    const original: unknown = descriptor.value;
    if (typeof original !== 'function') {
      throw new LockConfigError('@Locked', 'can only decorate a method', where);
    }
    // Checked at class definition, not at the first call.
    const { acquireOptions, onBusy, signalOf, resolveKey } = named(where, () =>
      prepare(key as LockKeySource, options as LockedOptions),
    );
    const method = original as AnyMethod;
    // The module checks, at bootstrap, that its backend can grant what these options ask.
    declareLocked(target, { where, options: acquireOptions });
    // Not an async function: withLock's promise is handed on with one rejection handler, not
    // awaited in a frame of its own (an async wrapper was most of @Locked's cost over withLock).
    const wrapped = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const service = lockServiceFor(this);
      if (!service) {
        return Promise.reject(
          new LockConfigError(
            'LockModule',
            'called before LockModule was initialised (or after shutdown): import ' +
              'LockModule.forRoot({ backends: { ... } }) (or forRootAsync) in your application ' +
              'module; refusing to run the method unlocked',
            where,
          ),
        );
      }
      let keys: string | string[];
      let callOptions: LockOptions;
      try {
        keys = resolveKey(args);
        callOptions = signalOf ? withSignal(acquireOptions, signalOf(...args)) : acquireOptions;
      } catch (err) {
        return Promise.reject(namedError(err, where));
      }
      let entered = false;
      return service
        .withLock(
          keys,
          () => {
            entered = true;
            return method.apply(this, args as never[]);
          },
          callOptions,
        )
        .catch((err: unknown) => {
          // Only a busy lock of our own acquisition is skipped, never one thrown by the method.
          if (onBusy === 'skip' && !entered && err instanceof LockNotAcquiredError)
            return undefined;
          throw entered ? err : namedError(err, where);
        });
    };
    copyIdentity(method, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}

/** Validates the decorator's key and options once, into what each call needs. */
function prepare(key: LockKeySource, options: LockedOptions) {
  if (typeof key !== 'string' && typeof key !== 'function') {
    throw new LockConfigError('key', 'needs a key template or a key function');
  }
  const {
    onBusy = 'throw',
    signal: signalOf,
    ...lockOptions
  } = copyOwnOptions(options, 'options') as LockedOptions;
  if (onBusy !== 'throw' && onBusy !== 'skip') {
    throw new LockConfigError('onBusy', `must be 'throw' or 'skip', got ${describe(onBusy)}`);
  }
  if (signalOf !== undefined && typeof signalOf !== 'function') {
    throw new LockConfigError(
      'signal',
      'must be a function of the method arguments returning an AbortSignal (or undefined)',
    );
  }
  validateLockOptions(lockOptions);
  // Skipping means "someone else is doing it": do not queue behind them unless asked to.
  const acquireOptions: LockOptions =
    onBusy === 'skip' && lockOptions.waitTimeout === undefined
      ? { ...lockOptions, waitTimeout: 0 }
      : lockOptions;
  return { acquireOptions, onBusy, signalOf, resolveKey: compileLockKey(key) };
}

/** The call's options with the signal the `signal` option derived from its arguments. */
function withSignal(options: LockOptions, signal: unknown): LockOptions {
  return signal === undefined ? options : { ...options, signal: checkSignal(signal, 'signal') };
}

/** Runs `fn`; a `LockConfigError` it throws is thrown again naming where it happened. */
function named<T>(where: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw namedError(err, where);
  }
}

/** `err`, or a `LockConfigError` without a place as one naming `where`. */
function namedError(err: unknown, where: string): unknown {
  return err instanceof LockConfigError && !err.where
    ? new LockConfigError(err.field, err.detail, where)
    : err;
}
