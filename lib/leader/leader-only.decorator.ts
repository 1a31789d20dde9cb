import { LockConfigError } from '../errors/lock.errors';
import { type AnyMethod, copyIdentity, describeMethod } from '../decorators/method-identity';
import { leaderOnlyPrototypes, leaderServiceFor } from '../lock-service.holder';
import { leaderKey } from './leader-label';
import type { LeaderDecoratorOptions } from './leader.interfaces';
import { LeaderService } from './leader.service';

/**
 * Runs the decorated method only on the instance that leads `name`; elsewhere the call resolves
 * `undefined` without running it. The module campaigns for `name` from bootstrap to shutdown,
 * so leadership is sticky: the same instance runs every call (every `@Cron` tick) while it
 * leads, and another takes over when it stops, crashes or loses its lease. The method becomes
 * async. Fails closed: before `LockModule` is initialised (or after shutdown) the call rejects
 * with `LockConfigError` and the method does not run.
 */
export function LeaderOnly(name: string, options: LeaderDecoratorOptions = {}): MethodDecorator {
  return (target: object, propertyKey: string | symbol, descriptor: PropertyDescriptor) => {
    const where = `@LeaderOnly on ${describeMethod(target, propertyKey)}`;
    const original: unknown = descriptor?.value;
    let opts: LeaderDecoratorOptions;
    try {
      if (typeof original !== 'function') {
        throw new LockConfigError('@LeaderOnly', 'can only decorate a method');
      }
      leaderKey(name);
      opts = LeaderService.checkDecoratorOptions(options);
    } catch (err) {
      throw err instanceof LockConfigError
        ? new LockConfigError(err.field, err.detail, where)
        : err;
    }
    const method = original as AnyMethod;
    const list = leaderOnlyPrototypes.get(target) ?? [];
    list.push({ name, options: opts });
    leaderOnlyPrototypes.set(target, list);
    const wrapped = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const leaders = leaderServiceFor(this);
      if (!leaders) {
        return Promise.reject(
          new LockConfigError(
            'LockModule',
            'called before LockModule was initialised (or after shutdown): refusing to run ' +
              'the method without knowing that this instance leads',
            where,
          ),
        );
      }
      try {
        if (!leaders.elector(name, opts).leading()) return Promise.resolve(undefined);
        return Promise.resolve(method.apply(this, args as never[]));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    copyIdentity(method, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}
