import { LockConfigError } from '../errors/lock.errors';
import { leaderKey } from './leader-label';
import type { LeaderDecoratorOptions } from './leader.interfaces';
import { LeaderService } from './leader.service';

/** What `@Leader` recorded on a class. */
export interface LeaderDeclaration {
  readonly name: string;
  readonly options: LeaderDecoratorOptions;
}

/** Classes decorated with `@Leader`. */
const leaderClasses = new WeakMap<object, LeaderDeclaration>();

/**
 * Makes a provider a candidate for `name`: the module campaigns at bootstrap, calls its
 * `onLeadershipGranted(leadership)` each time this instance starts to lead and
 * `onLeadershipRevoked()` each time that ends, and campaigns again after each loss until
 * shutdown, which resigns (the next candidate leads within a round trip).
 */
export function Leader(name: string, options: LeaderDecoratorOptions = {}): ClassDecorator {
  return (target) => {
    const where = `@Leader on ${target.name}`;
    try {
      leaderKey(name);
      leaderClasses.set(target, { name, options: LeaderService.checkDecoratorOptions(options) });
    } catch (err) {
      throw err instanceof LockConfigError
        ? new LockConfigError(err.field, err.detail, where)
        : err;
    }
  };
}

/** The `@Leader` declaration of a class, if it has one. */
export function leaderDeclaration(type: unknown): LeaderDeclaration | undefined {
  return typeof type === 'function' ? leaderClasses.get(type) : undefined;
}
