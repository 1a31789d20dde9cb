import type { LockOptions } from './lock.interfaces';
import type { LockService } from './lock.service';
import type { LeaderService } from './leader/leader.service';

/**
 * Where `@Locked` finds the service. Decorators run before DI exists, so each `LockModule`
 * binds, when it initialises, the provider and controller instances of its own application
 * that have `@Locked` methods (`bindings`), and unbinds them at shutdown; so two applications
 * in one process each lock through their own module. Instances Nest did not create at
 * bootstrap (request-scoped, transient, `new`-ed by hand) use the most recently initialised
 * module (`service`). Until a module is there, `@Locked` methods refuse to run.
 */
export const LockServiceHolder: {
  service?: LockService;
  leaders?: LeaderService;
} = {};

/** One module's binding; both are cleared when that module shuts down. */
export interface LockBinding {
  service?: LockService;
  /** What `@LeaderOnly` methods ask whether this instance leads. */
  leaders?: LeaderService;
}

/** Instance → the binding of the module of its application. */
export const lockBindings = new WeakMap<object, LockBinding>();

/** One `@Locked` method as declared: where it is (for errors) and its static options. */
export interface LockedDeclaration {
  /** `@Locked on Class.method`, as every configuration error names it. */
  readonly where: string;
  /** The options every call starts from (validated when the class was defined). */
  readonly options: LockOptions;
}

/**
 * Prototypes that declare `@Locked` methods, with their declarations (filled by the decorator):
 * the module checks them at bootstrap against the backends it configured.
 */
export const lockedPrototypes = new WeakMap<object, LockedDeclaration[]>();

/** Records a `@Locked` method of `prototype`. */
export function declareLocked(prototype: object, declaration: LockedDeclaration): void {
  const list = lockedPrototypes.get(prototype);
  if (list) list.push(declaration);
  else lockedPrototypes.set(prototype, [declaration]);
}

/**
 * The `@Locked` declarations of a class (its `prototype`) and of the classes it extends (empty
 * when it has none).
 */
export function lockedDeclarations(prototype: object): LockedDeclaration[] {
  const found: LockedDeclaration[] = [];
  for (let p: unknown = prototype; p && p !== Object.prototype;) {
    const own = lockedPrototypes.get(p as object);
    if (own) found.push(...own);
    p = Object.getPrototypeOf(p);
  }
  return found;
}

/**
 * Prototypes with `@LeaderOnly` methods, with the names they lead (filled by the decorator): the
 * module binds their instances and starts campaigning for those names at bootstrap.
 */
export const leaderOnlyPrototypes = new WeakMap<object, LeaderOnlyDeclaration[]>();

/** One `@LeaderOnly` method as declared. */
export interface LeaderOnlyDeclaration {
  readonly name: string;
  readonly options: object;
}

/** Whether `instance`'s class, or a class it extends, has a `@Locked` or `@LeaderOnly` method. */
export function hasLockedMethods(instance: object): boolean {
  for (let p = Object.getPrototypeOf(instance); p && p !== Object.prototype;) {
    if (lockedPrototypes.has(p as object) || leaderOnlyPrototypes.has(p as object)) return true;
    p = Object.getPrototypeOf(p);
  }
  return false;
}

/** The `@LeaderOnly` declarations of a class (its `prototype`) and the classes it extends. */
export function leaderOnlyDeclarations(prototype: object): LeaderOnlyDeclaration[] {
  const found: LeaderOnlyDeclaration[] = [];
  for (let p: unknown = prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    found.push(...(leaderOnlyPrototypes.get(p as object) ?? []));
  }
  return found;
}

/** The binding a decorated method called on `self` uses (its module's, else the latest). */
function bindingFor(self: unknown): LockBinding {
  const binding = typeof self === 'object' && self !== null ? lockBindings.get(self) : undefined;
  return binding ?? LockServiceHolder;
}

/** The service a `@Locked` method called on `self` must use, if any. */
export function lockServiceFor(self: unknown): LockService | undefined {
  return bindingFor(self).service;
}

/** The leader service a `@LeaderOnly` method called on `self` must use, if any. */
export function leaderServiceFor(self: unknown): LeaderService | undefined {
  return bindingFor(self).leaders;
}
