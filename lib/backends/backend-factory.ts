import type { LockBackend } from './lock-backend.interface';

/**
 * How a backend type is validated and built. `validate` runs at bootstrap, before any I/O,
 * and throws `LockConfigError` naming `field` (e.g. `backends.main.url`); `create` may load
 * the backend's optional package lazily.
 */
export interface BackendFactory<C> {
  validate(config: C & Record<string, unknown>, field: string): void;
  create(config: C, name: string, context: BackendContext): Promise<LockBackend>;
}

/** What a backend may need from the application while it is built. */
export interface BackendContext {
  /** Looks a provider up in Nest DI by token (call it lazily: providers may not exist yet). */
  resolve(token: unknown): unknown;
}
