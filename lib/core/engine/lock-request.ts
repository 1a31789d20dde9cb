import type { LockBackend } from '../contract/lock-backend';
import type { LockSettings } from '../settings/module-options';
import { validateKeys, validateLockOptions } from '../settings/validation';
import type { BackendRegistry } from './backend-registry';

/** One acquisition as the engine runs it: validated, defaults applied, keys in canonical order. */
export interface LockRequest {
  readonly backendName: string;
  readonly backend: LockBackend;
  /** `[key, fullKey]` pairs (without and with the module prefix), in canonical order. */
  readonly keys: ReadonlyArray<readonly [string, string]>;
  readonly ttl: number;
  /** `0` for a single try; `Infinity` to wait until granted or shut down. */
  readonly waitTimeout: number;
  readonly autoRenew: boolean;
  readonly lockAtLeastFor: number;
  /** Hard cap on holding, ms; `undefined`: none. */
  readonly maxHold?: number;
  /** The caller's signal: aborting it stops the wait. */
  readonly signal?: AbortSignal;
}

/**
 * Turns a caller's keys and options into a {@link LockRequest}, or throws `LockConfigError`
 * naming the field, before any I/O. `defaultBackend` is a per-backend `LockService`'s name.
 */
export function prepareLockRequest(
  keys: unknown,
  options: unknown,
  isTry: boolean,
  settings: LockSettings,
  backends: BackendRegistry,
  defaultBackend?: string,
): LockRequest {
  const list = validateKeys(keys);
  const opts = validateLockOptions(options);
  const backendName = backends.resolve(opts.backend, defaultBackend);
  // Canonical order (by the key the store sees) so two multi-key requests never deadlock.
  const pairs =
    list.length === 1
      ? [[list[0], settings.keyPrefix + list[0]] as const]
      : list
          .map((k) => [k, settings.keyPrefix + k] as const)
          .sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return {
    backendName,
    backend: backends.get(backendName),
    keys: pairs,
    ttl: opts.ttl ?? settings.ttl,
    waitTimeout: isTry ? 0 : (opts.waitTimeout ?? settings.waitTimeout),
    autoRenew: opts.autoRenew ?? settings.autoRenew,
    lockAtLeastFor: opts.lockAtLeastFor ?? 0,
    maxHold: opts.maxHold ?? settings.maxHold,
    signal: opts.signal,
  };
}
