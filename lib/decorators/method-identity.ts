import 'reflect-metadata';

/** A method as decorators wrap it. */
export type AnyMethod = (...args: never[]) => unknown;

/** Copies name, length and every reflect-metadata entry, so Nest's own decorators still see theirs. */
export function copyIdentity(from: AnyMethod, to: AnyMethod): void {
  Object.defineProperty(to, 'name', { value: from.name, configurable: true });
  Object.defineProperty(to, 'length', { value: from.length, configurable: true });
  for (const metaKey of Reflect.getMetadataKeys(from)) {
    Reflect.defineMetadata(metaKey, Reflect.getMetadata(metaKey, from), to);
  }
}

/** `Class.method`, as errors name a decorated method. */
export function describeMethod(target: object, propertyKey: string | symbol): string {
  const owner = typeof target === 'function' ? target.name : target.constructor?.name;
  return `${owner ?? '?'}.${String(propertyKey)}`;
}
