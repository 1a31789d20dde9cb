import { LockConfigError } from '../../errors/lock.errors';
import type { LockBackend, LockMode } from '../contract/lock-backend';
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
  /** `'exclusive'` unless asked otherwise; the same for every key. */
  readonly mode: LockMode;
  /** Holders admitted per key (1: a mutex); the same for every key. */
  readonly permits: number;
  /**
   * Text the owner token carries after its random part (`<random>.<label>`), readable by
   * anyone through the holder's token (leadership: who leads). Never from user options.
   */
  readonly label?: string;
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
  const backend = backends.get(backendName);
  const mode = opts.mode ?? 'exclusive';
  const permits = opts.permits ?? 1;
  if (mode !== 'exclusive' || permits !== 1) checkCapable(backends, backendName, mode, permits);
  // Canonical order (by the key the store sees) so two multi-key requests never deadlock.
  const pairs =
    list.length === 1
      ? [[list[0], settings.keyPrefix + list[0]] as const]
      : list
          .map((k) => [k, settings.keyPrefix + k] as const)
          .sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return {
    backendName,
    backend,
    keys: pairs,
    ttl: opts.ttl ?? settings.ttl,
    waitTimeout: isTry ? 0 : (opts.waitTimeout ?? settings.waitTimeout),
    autoRenew: opts.autoRenew ?? settings.autoRenew,
    lockAtLeastFor: opts.lockAtLeastFor ?? 0,
    maxHold: opts.maxHold ?? settings.maxHold,
    signal: opts.signal,
    mode,
    permits,
  };
}

/**
 * Checks, without I/O, that `options` could be granted: valid, a configured backend, and one
 * that can grant their `mode` and `permits`; throws `LockConfigError` naming the field
 * otherwise. For `@Locked` declarations, checked when the module starts.
 */
export function checkGrantable(
  options: unknown,
  backends: BackendRegistry,
  defaultBackend?: string,
): void {
  const opts = validateLockOptions(options);
  const backendName = backends.resolve(opts.backend, defaultBackend);
  const mode = opts.mode ?? 'exclusive';
  const permits = opts.permits ?? 1;
  if (mode !== 'exclusive' || permits !== 1) checkCapable(backends, backendName, mode, permits);
}

/**
 * Refuses, before any I/O, a shared or counted request on a backend that cannot grant it (a
 * mutex-only store would otherwise hand out an exclusive lock, or none, silently). The error
 * names the backend and the configured backends that can.
 */
function checkCapable(
  backends: BackendRegistry,
  backendName: string,
  mode: LockMode,
  permits: number,
): void {
  const [field, capability, what] =
    mode === 'shared'
      ? (['mode', 'shared', "mode 'shared'"] as const)
      : (['permits', 'permits', `permits: ${permits}`] as const);
  const capabilities = backends.get(backendName).capabilities;
  if (capabilities[capability] === true) {
    const most = capabilities.maxPermits;
    if (mode === 'shared' || most === undefined || permits <= most) return;
    throw new LockConfigError(
      'permits',
      `backend "${backendName}" grants at most ${most} permits per key, got ${permits} (see the ` +
        `README's "Shared and counted locks" table)`,
    );
  }
  const able = backends
    .names()
    .filter((name) => backends.get(name).capabilities[capability] === true);
  const use =
    able.length > 0
      ? `use a backend that can: ${able.map((n) => `"${n}"`).join(', ')}`
      : 'no configured backend can; the memory backend can';
  throw new LockConfigError(
    field,
    `backend "${backendName}" cannot grant ${what} (its capabilities.${capability} is not true); ` +
      `${use} (see the README's "Shared and counted locks" table)`,
  );
}
