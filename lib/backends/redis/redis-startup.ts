import type { SecretRedactor } from '../../core/contract/backend-factory';
import { LockBackendError, LockConfigError } from '../../errors/lock.errors';

/** What a Redis or Redlock backend does when its store does not answer at bootstrap. */
export type StartupMode = 'fail' | 'degraded';

/** `startup` is absent, `'fail'` or `'degraded'`. */
export function checkStartup(value: unknown, field: string): void {
  if (value !== undefined && value !== 'fail' && value !== 'degraded') {
    throw new LockConfigError(field, `must be 'fail' or 'degraded' (got ${JSON.stringify(value)})`);
  }
}

/**
 * `startup: 'fail'`: runs `check` (the store answers); if it rejects, closes the backend (the
 * clients it created) and rejects bootstrap with a `LockBackendError` naming the reason.
 */
export async function startOrClose(
  backend: { close(): Promise<void> },
  name: string,
  redactor: SecretRedactor,
  check: () => Promise<void>,
): Promise<void> {
  try {
    await check();
  } catch (err) {
    await backend.close().catch(() => undefined);
    throw new LockBackendError(
      name,
      `the store did not answer at startup (startup: 'fail'): ${redactor.message(err)}`,
      { cause: redactor.error(err) },
    );
  }
}
