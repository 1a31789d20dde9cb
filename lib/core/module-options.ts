import { LockConfigError } from '../errors/lock.errors';
import type { BackendContext } from '../backends/backend-factory';
import type { LockBackend } from '../backends/lock-backend.interface';
import { BACKEND_FACTORIES } from '../backends/registry';
import type { LockModuleOptions } from '../lock.interfaces';
import type { LockSettings } from './lock-manager';
import { OtelLockMetrics } from './otel-metrics';
import { describe, validateBoolean, validateObject, validateTtl, validateWait } from './validation';

/** Library defaults: a 30 s lease (never the 100 ms some libraries ship) and a 10 s wait. */
export const DEFAULT_TTL_MS = 30_000;
export const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
export const DEFAULT_NOT_ACQUIRED_HTTP_STATUS = 409;
/** Bound on one store call: long enough for a slow store, short enough that nothing hangs. */
export const DEFAULT_OPERATION_TIMEOUT_MS = 5_000;
const MAX_PREFIX_LENGTH = 256;
const MODULE_KEYS = new Set([
  'backends',
  'defaultBackend',
  'defaults',
  'keyPrefix',
  'notAcquiredHttpStatus',
  'operationTimeout',
  'shutdown',
  'metrics',
]);
const SHUTDOWN_KEYS = new Set(['inFlight', 'timeout']);
/** Default of `shutdown.timeout`: how long in-flight locked work gets to finish, ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
const DEFAULTS_KEYS = new Set(['ttl', 'waitTimeout', 'autoRenew']);
const BACKEND_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Validates module options (everything, before any I/O) and builds the backends. Every
 * failure is a `LockConfigError` naming the backend and field.
 */
export async function buildLockRuntime(
  input: unknown,
  context: BackendContext = { resolve: () => undefined },
): Promise<{ settings: LockSettings; backends: Map<string, LockBackend> }> {
  const options = validateObject(input, 'options') as Partial<LockModuleOptions> &
    Record<string, unknown>;
  for (const name of Object.keys(options)) {
    if (!MODULE_KEYS.has(name)) throw new LockConfigError(name, 'unknown option');
  }
  const backendsIn = validateObject(options.backends, 'backends');
  const names = Object.keys(backendsIn);
  if (names.length === 0) throw new LockConfigError('backends', 'configure at least one backend');

  const factories = new Map<string, Awaited<ReturnType<(typeof BACKEND_FACTORIES)[string]>>>();
  for (const name of names) {
    const field = `backends.${name}`;
    if (!BACKEND_NAME.test(name)) {
      throw new LockConfigError(field, 'backend names are 1-64 letters, digits, "_", "-" or "."');
    }
    const config = validateObject(backendsIn[name], field);
    const type = config.type;
    const load =
      typeof type === 'string' && Object.hasOwn(BACKEND_FACTORIES, type)
        ? BACKEND_FACTORIES[type]
        : undefined;
    if (!load) {
      throw new LockConfigError(
        `${field}.type`,
        `unknown backend type ${JSON.stringify(type) ?? String(type)}; known: ${Object.keys(BACKEND_FACTORIES).join(', ')}`,
      );
    }
    const factory = await load();
    factory.validate(config, field);
    factories.set(name, factory);
  }

  let defaultBackend = options.defaultBackend;
  if (defaultBackend === undefined) {
    if (names.length > 1) {
      throw new LockConfigError(
        'defaultBackend',
        `required when several backends are configured (${names.join(', ')})`,
      );
    }
    defaultBackend = names[0];
  } else if (typeof defaultBackend !== 'string' || !names.includes(defaultBackend)) {
    throw new LockConfigError(
      'defaultBackend',
      `must name a configured backend (${names.join(', ')})`,
    );
  }

  const defaults =
    options.defaults === undefined ? {} : validateObject(options.defaults, 'defaults');
  for (const name of Object.keys(defaults)) {
    if (!DEFAULTS_KEYS.has(name)) throw new LockConfigError(`defaults.${name}`, 'unknown option');
  }
  const keyPrefix = options.keyPrefix ?? '';
  if (typeof keyPrefix !== 'string' || keyPrefix.length > MAX_PREFIX_LENGTH) {
    throw new LockConfigError(
      'keyPrefix',
      `must be a string of at most ${MAX_PREFIX_LENGTH} characters`,
    );
  }
  const status = options.notAcquiredHttpStatus ?? DEFAULT_NOT_ACQUIRED_HTTP_STATUS;
  if (status !== false && !(Number.isInteger(status) && status >= 400 && status <= 599)) {
    throw new LockConfigError(
      'notAcquiredHttpStatus',
      'must be an HTTP error status (400-599) or false',
    );
  }

  const settings: LockSettings = {
    defaultBackend,
    keyPrefix,
    ttl: defaults.ttl === undefined ? DEFAULT_TTL_MS : validateTtl(defaults.ttl, 'defaults.ttl'),
    waitTimeout:
      defaults.waitTimeout === undefined
        ? DEFAULT_WAIT_TIMEOUT_MS
        : validateWait(defaults.waitTimeout, 'defaults.waitTimeout'),
    autoRenew:
      defaults.autoRenew === undefined
        ? true
        : validateBoolean(defaults.autoRenew, 'defaults.autoRenew'),
    notAcquiredHttpStatus: status,
    operationTimeout:
      options.operationTimeout === undefined
        ? DEFAULT_OPERATION_TIMEOUT_MS
        : validateTtl(options.operationTimeout, 'operationTimeout'),
    shutdown: validateShutdown(options.shutdown),
  };
  const metrics =
    options.metrics === undefined ? true : validateBoolean(options.metrics, 'metrics');

  // Only now, with everything validated, touch the outside world.
  const otel = metrics ? await OtelLockMetrics.load() : undefined;
  const backends = new Map<string, LockBackend>();
  try {
    for (const [name, factory] of factories) {
      backends.set(name, await factory.create(backendsIn[name], name, context));
    }
  } catch (err) {
    await Promise.allSettled([...backends.values()].map((b) => b.close()));
    throw err;
  }
  return { settings: otel ? { ...settings, otel } : settings, backends };
}

/** `shutdown: { inFlight, timeout }`, with defaults `'finish'` and 10 s. */
function validateShutdown(input: unknown): LockSettings['shutdown'] {
  const shutdown = input === undefined ? {} : validateObject(input, 'shutdown');
  for (const name of Object.keys(shutdown)) {
    if (!SHUTDOWN_KEYS.has(name)) throw new LockConfigError(`shutdown.${name}`, 'unknown option');
  }
  const inFlight = shutdown.inFlight ?? 'finish';
  if (inFlight !== 'finish' && inFlight !== 'abort') {
    throw new LockConfigError(
      'shutdown.inFlight',
      `must be 'finish' or 'abort', got ${describe(inFlight)}`,
    );
  }
  const timeout =
    shutdown.timeout === undefined
      ? DEFAULT_SHUTDOWN_TIMEOUT_MS
      : validateTtl(shutdown.timeout, 'shutdown.timeout');
  return { inFlight, timeout };
}
