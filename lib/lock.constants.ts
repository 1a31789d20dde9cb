/** @internal Injection token of the lock engine behind every `LockService` of one module. */
export const LOCK_ENGINE = Symbol('nestjs-distributed-lock:LockEngine');

/** Prefix of per-backend provider tokens. */
const BACKEND_TOKEN_PREFIX = 'nestjs-distributed-lock:backend:';

/**
 * Injection token of the `LockService` bound to backend `name` (what `@InjectLockBackend(name)`
 * injects). A string, so the same name gives the same token across module instances.
 */
export function getLockBackendToken(name: string): string {
  return `${BACKEND_TOKEN_PREFIX}${name}`;
}
