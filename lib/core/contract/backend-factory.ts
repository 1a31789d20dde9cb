import type { LockBackend } from './lock-backend';

/**
 * How a backend type is validated and built. `validate` runs at bootstrap, before any I/O,
 * and throws `LockConfigError` naming `field` (e.g. `backends.main.url`); `create` may load
 * the backend's optional package lazily.
 */
export interface BackendFactory<C> {
  /** Checks one backend's configuration; throws `LockConfigError` naming the field. */
  validate(config: C & Record<string, unknown>, field: string): void;
  /** Builds the backend named `name` from a validated configuration. */
  create(config: C, name: string, context: BackendContext): Promise<LockBackend>;
}

/** What a backend may need from the application while it is built. */
export interface BackendContext {
  /** Looks a provider up in Nest DI by token (call it lazily: providers may not exist yet). */
  resolve(token: unknown): unknown;
  /**
   * Scrubs the configuration's secrets (passwords, credentials, URL passwords) from text and
   * errors: every log line and error a backend writes itself goes through it.
   */
  readonly redactor: SecretRedactor;
  /**
   * The module's `keyPrefix`: every key reaching the backend starts with it, and a backend puts
   * every name it writes in the store under it (a store user's permissions may allow no other).
   */
  readonly keyPrefix: string;
  /** The module's default lease (`defaults.ttl`), in ms. */
  readonly defaultTtl: number;
}

/** Keeps a configuration's secrets out of text and errors (see `BackendContext.redactor`). */
export interface SecretRedactor {
  /** `text` with every known secret replaced. */
  text(text: string): string;
  /** The message of any thrown value, redacted. */
  message(err: unknown): string;
  /** A copy of `err` safe to log or keep as a `cause` (only fields that carry no data). */
  error(err: unknown): Error | undefined;
}

/**
 * Backend types by their `type` name, each loading its factory (and so its optional peer
 * package) only when a backend of that type is configured. The engine receives it; only the
 * registration file (`lib/backends/backend-types.ts`) knows every backend.
 */
export type BackendTypes = Readonly<Record<string, () => Promise<BackendFactory<unknown>>>>;
