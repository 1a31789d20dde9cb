import type { LockBackendHealth } from '../../lock.interfaces';
import type { LockBackend } from '../contract/lock-backend';
import { monotonicNow } from '../shared/clock';
import type { SecretRedactor } from '../contract/backend-factory';
import { withTimeout } from '../shared/timers';

/** Default bound on one backend's ping, ms: short enough for a readiness probe's own timeout. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1_000;

/**
 * Pings each named backend in parallel, each bounded by `timeoutMs`: a store that never answers
 * is reported `down` with the reason, never waited on, and one slow store does not delay the
 * report of the others.
 */
export async function pingBackends(
  backends: { get(name: string): LockBackend },
  names: readonly string[],
  timeoutMs: number,
  closing: boolean,
  redactor: SecretRedactor,
): Promise<Record<string, LockBackendHealth>> {
  const results = await Promise.all(
    names.map(async (name): Promise<[string, LockBackendHealth]> => {
      const started = monotonicNow();
      const latency = (): number => Math.round((monotonicNow() - started) * 10) / 10;
      if (closing) return [name, { status: 'down', latencyMs: 0, error: 'shutting down' }];
      try {
        await withTimeout(backends.get(name).ping(), timeoutMs);
        return [name, { status: 'up', latencyMs: latency() }];
      } catch (err) {
        return [name, { status: 'down', latencyMs: latency(), error: redactor.message(err) }];
      }
    }),
  );
  return Object.fromEntries(results);
}
