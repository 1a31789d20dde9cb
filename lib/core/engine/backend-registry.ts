import type { Logger } from '@nestjs/common';
import { LockConfigError } from '../../errors/lock.errors';
import type { LockBackend } from '../contract/lock-backend';
import type { SecretRedactor } from '../contract/backend-factory';
import { describe } from '../shared/options';

/**
 * The configured backends by name: lookup (with the default), the check that each keeps its
 * side of the contract, and closing them all. It knows backends only through the contract.
 */
export class BackendRegistry {
  private readonly backends: ReadonlyMap<string, LockBackend>;

  constructor(
    backends: ReadonlyMap<string, LockBackend>,
    /** Backend used when an acquisition names none. */
    readonly defaultName: string,
  ) {
    this.backends = backends;
    for (const [name, backend] of backends) checkContract(name, backend);
    if (!backends.has(defaultName)) throw this.unknown(defaultName);
  }

  /** Names of the configured backends, in configuration order. */
  names(): string[] {
    return [...this.backends.keys()];
  }

  /** Whether `name` is configured. */
  has(name: string): boolean {
    return this.backends.has(name);
  }

  /** The backend named `name`, or `LockConfigError` naming the configured ones. */
  get(name: string): LockBackend {
    const backend = this.backends.get(name);
    if (!backend) throw this.unknown(name);
    return backend;
  }

  /**
   * The backend name an acquisition uses: its `backend` option if set (it must be a configured
   * name), else `fallback` (a per-backend `LockService`), else the module's default.
   */
  resolve(value: unknown, fallback?: string): string {
    if (value === undefined) return fallback ?? this.defaultName;
    if (typeof value !== 'string' || !this.backends.has(value)) throw this.unknown(value);
    return value;
  }

  /** Every (name, backend) pair. */
  entries(): IterableIterator<[string, LockBackend]> {
    return this.backends.entries();
  }

  /** Closes every backend (each closes only the clients it created); failures are logged. */
  async closeAll(logger: Logger, redactor: SecretRedactor): Promise<void> {
    const entries = [...this.backends];
    const results = await Promise.allSettled(entries.map(([, backend]) => backend.close()));
    results.forEach((result, i) => {
      if (result.status === 'rejected') {
        logger.error(
          `closing backend "${entries[i][0]}" failed: ${redactor.message(result.reason)}`,
        );
      }
    });
  }

  /** `LockConfigError` for a backend name that is not configured. */
  unknown(value: unknown): LockConfigError {
    return new LockConfigError(
      'backend',
      `unknown backend ${describe(value)}; configured: ${this.names().join(', ')}`,
    );
  }
}

/** A backend that declares a queue must implement it: caught at bootstrap, not at first wait. */
function checkContract(name: string, backend: LockBackend): void {
  const { waiting } = backend.capabilities;
  if (waiting !== 'poll' && waiting !== 'queue' && waiting !== 'queue-first') {
    throw new LockConfigError(
      `backends.${name}`,
      `its capabilities.waiting is ${String(waiting)}; expected 'poll', 'queue' or 'queue-first'`,
    );
  }
  if (waiting !== 'poll' && typeof backend.acquire !== 'function') {
    throw new LockConfigError(
      `backends.${name}`,
      `declares waiting '${waiting}' but has no acquire(): a queue needs its wait`,
    );
  }
}
