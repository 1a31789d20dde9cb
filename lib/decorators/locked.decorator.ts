import 'reflect-metadata';
import { LockConfigError, LockNotAcquiredError } from '../errors/lock.errors';
import { compileLockKey, type LockKeySource } from '../core/settings/key-template';
import { validateLockOptions } from '../core/settings/validation';
import { checkObject } from '../core/shared/options';
import type { LockedOptions, LockOptions } from '../lock.interfaces';
import { lockedPrototypes, lockServiceFor } from '../lock-service.holder';

type AnyMethod = (...args: never[]) => unknown;

/**
 * Runs the decorated method under a distributed lock: acquired before, renewed during,
 * released after (on resolve or reject; the method's own error is rethrown unchanged).
 * `key` is a template (`'stock:{0}'`, `'order:{0.id}'`) or a function of the arguments
 * returning a key or an array of keys (multi-lock, all or none). Works on providers,
 * controllers, `@Cron` and message handlers; the method becomes async. Fails closed: if
 * `LockModule` is not initialised, or the key does not resolve, the method does not run.
 */
export function Locked<A extends unknown[] = unknown[]>(
  key: LockKeySource<A>,
  options: LockedOptions = {},
): MethodDecorator {
  if (typeof key !== 'string' && typeof key !== 'function') {
    throw new LockConfigError('key', '@Locked needs a key template or a key function');
  }
  const { onBusy = 'throw', ...lockOptions } = checkObject(options, 'options') as LockedOptions;
  if (onBusy !== 'throw' && onBusy !== 'skip') {
    throw new LockConfigError('onBusy', `must be 'throw' or 'skip', got ${JSON.stringify(onBusy)}`);
  }
  validateLockOptions(lockOptions); // fail at class definition, not at the first call
  // Skipping means "someone else is doing it": do not queue behind them unless asked to.
  const acquireOptions: LockOptions =
    onBusy === 'skip' && lockOptions.waitTimeout === undefined
      ? { ...lockOptions, waitTimeout: 0 }
      : lockOptions;
  const resolveKey = compileLockKey(key as LockKeySource);

  return (target: object, propertyKey: string | symbol, descriptor: PropertyDescriptor) => {
    const original: unknown = descriptor.value;
    if (typeof original !== 'function') {
      throw new LockConfigError('@Locked', `${String(propertyKey)} is not a method`);
    }
    const method = original as AnyMethod;
    lockedPrototypes.add(target);
    const wrapped = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const service = lockServiceFor(this);
      if (!service) {
        throw new LockConfigError(
          'LockModule',
          `@Locked ${describeMethod(target, propertyKey)} called before LockModule was initialised (or after shutdown); refusing to run it unlocked`,
        );
      }
      const keys = resolveKey(args);
      let entered = false;
      try {
        return await service.withLock(
          keys,
          () => {
            entered = true;
            return method.apply(this, args as never[]);
          },
          acquireOptions,
        );
      } catch (err) {
        // Only a busy lock of our own acquisition is skipped, never one thrown by the method.
        if (onBusy === 'skip' && !entered && err instanceof LockNotAcquiredError) return undefined;
        throw err;
      }
    };
    copyIdentity(method, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}

/** Copies name, length and every reflect-metadata entry, so Nest's own decorators still see theirs. */
function copyIdentity(from: AnyMethod, to: AnyMethod): void {
  Object.defineProperty(to, 'name', { value: from.name, configurable: true });
  Object.defineProperty(to, 'length', { value: from.length, configurable: true });
  for (const metaKey of Reflect.getMetadataKeys(from)) {
    Reflect.defineMetadata(metaKey, Reflect.getMetadata(metaKey, from), to);
  }
}

function describeMethod(target: object, propertyKey: string | symbol): string {
  const owner = typeof target === 'function' ? target.name : target.constructor?.name;
  return `${owner ?? '?'}.${String(propertyKey)}`;
}
