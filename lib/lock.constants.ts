/** Injection token of the internal `LockManager` (the engine behind every `LockService`). */
export const LOCK_MANAGER = Symbol('nestjs-distributed-lock:LockManager');

/** Prefix of per-backend provider tokens. */
const BACKEND_TOKEN_PREFIX = 'nestjs-distributed-lock:backend:';

/**
 * Injection token of the `LockService` bound to backend `name` (what `@InjectLockBackend(name)`
 * injects). A string, so the same name gives the same token across module instances.
 */
export function getLockBackendToken(name: string): string {
  return `${BACKEND_TOKEN_PREFIX}${name}`;
}
