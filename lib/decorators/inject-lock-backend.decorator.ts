import { Inject } from '@nestjs/common';
import { getLockBackendToken } from '../lock.constants';

const requested = new Set<string>();

/**
 * Injects the `LockService` whose default backend is `name`:
 * `constructor(@InjectLockBackend('zk') private readonly zkLocks: LockService) {}`.
 */
export function InjectLockBackend(name: string): PropertyDecorator & ParameterDecorator {
  requested.add(name);
  return Inject(getLockBackendToken(name));
}

/** Backend names seen on `@InjectLockBackend`, so `forRootAsync` can provide them too. */
export function requestedBackendNames(): string[] {
  return [...requested];
}
