import { Inject } from '@nestjs/common';
import { getLockBackendToken } from '../lock.constants';

/** Names seen on `@InjectLockBackend`, read by `LockModule` when Nest scans its providers. */
const requested = new Set<string>();

/**
 * Injects the `LockService` whose default backend is `name`:
 * `constructor(@InjectLockBackend('zk') private readonly zkLocks: LockService) {}`.
 */
export function InjectLockBackend(name: string): PropertyDecorator & ParameterDecorator {
  requested.add(name);
  return Inject(getLockBackendToken(name));
}

/**
 * @internal Backend names seen on `@InjectLockBackend` so far. `LockModule` reads them when
 * Nest scans the module (when the application is created), by which time every class of the
 * application has been defined, so the answer does not depend on the order of imports.
 */
export function requestedBackendNames(): string[] {
  return [...requested];
}
