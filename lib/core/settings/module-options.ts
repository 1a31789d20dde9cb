import { LockBackendError, LockConfigError, LockError } from '../../errors/lock.errors';
import type { BackendContext, BackendFactory, BackendTypes } from '../contract/backend-factory';
import type { LockBackend } from '../contract/lock-backend';
import type { ShutdownSettings } from '../engine/shutdown-coordinator';
import { OtelLockMetrics } from '../engine/otel-metrics';
import { Redactor } from '../shared/redactor';
import { checkKeyText, checkTtl } from './validation';
import {
  checkBoolean,
  checkDuration,
  checkObject,
  checkOptions,
  checkWait,
  describe,
  readOption,
} from '../shared/options';

/** Module-wide settings of the engine after validation. */
export interface LockSettings {
  readonly defaultBackend: string;
  readonly keyPrefix: string;
  readonly ttl: number;
  readonly waitTimeout: number;
  readonly autoRenew: boolean;
  /** Hard cap on holding a lock, ms (`undefined`: none); see `LockOptions.maxHold`. */
  readonly maxHold?: number;
  /** Bound on any single store call (ms); see `LockModuleOptions.operationTimeout`. */
  readonly operationTimeout: number;
  /** What shutdown does with locks held by running work; see `LockModuleOptions.shutdown`. */
  readonly shutdown: ShutdownSettings;
  /** OpenTelemetry instruments, when `@opentelemetry/api` is installed and metrics are on. */
  readonly otel?: OtelLockMetrics;
  /**
   * Scrubs the backends' secrets from every message, log line and `cause` the engine writes
   * (always set by the module; an engine built without one scrubs URL passwords only).
   */
  readonly redactor?: Redactor;
}

/** Library defaults: a 30 s lease (never the 100 ms some libraries ship) and a 10 s wait. */
export const DEFAULT_TTL_MS = 30_000;
export const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
/** Bound on one store call: long enough for a slow store, short enough that nothing hangs. */
export const DEFAULT_OPERATION_TIMEOUT_MS = 5_000;
/** Default of `shutdown.timeout`: how long in-flight locked work gets to finish, ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
const MAX_PREFIX_LENGTH = 256;
/** The module options the engine reads (the HTTP layer reads its own: see `foreignKeys`). */
const ENGINE_KEYS = [
  'backends',
  'defaultBackend',
  'defaults',
  'keyPrefix',
  'operationTimeout',
  'shutdown',
  'metrics',
];
const SHUTDOWN_KEYS: ReadonlySet<string> = new Set(['inFlight', 'timeout']);
const DEFAULTS_KEYS: ReadonlySet<string> = new Set(['ttl', 'waitTimeout', 'autoRenew', 'maxHold']);
const BACKEND_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** What {@link buildLockRuntime} needs besides the options. */
export interface RuntimeSources {
  /** Backend types by `type` (the registration table). */
  readonly types: BackendTypes;
  /** Lookup of Nest providers for backends that reuse one (a DataSource, say). */
  readonly resolve?: BackendContext['resolve'];
  /** Module option keys validated by other layers (the HTTP mapping), accepted here as known. */
  readonly foreignKeys?: readonly string[];
}

/**
 * Validates module options (everything, before any I/O), then builds the backends. Every
 * validation failure is a `LockConfigError` naming the backend and field; a backend that
 * cannot start is a `LockBackendError` naming it.
 */
export async function buildLockRuntime(
  input: unknown,
  { types, resolve = () => undefined, foreignKeys = [] }: RuntimeSources,
): Promise<{ settings: LockSettings; backends: Map<string, LockBackend> }> {
  const options = checkOptions(input, new Set([...ENGINE_KEYS, ...foreignKeys]), 'options', '');
  const backendsIn = checkObject(options.backends, 'backends');
  const names = readOption('backends', () => Object.keys(backendsIn));
  if (names.length === 0) throw new LockConfigError('backends', 'configure at least one backend');

  const factories = new Map<string, BackendFactory<unknown>>();
  for (const name of names) {
    const field = `backends.${name}`;
    if (!BACKEND_NAME.test(name)) {
      throw new LockConfigError(field, 'backend names are 1-64 letters, digits, "_", "-" or "."');
    }
    // Results keyed by backend name (getMetrics(), health()) are plain objects, where this one
    // name would set the prototype instead of a field.
    if (name === '__proto__') throw new LockConfigError(field, 'is reserved; pick another name');
    const config = checkObject(
      readOption(field, () => backendsIn[name]),
      field,
    );
    const type = readOption(`${field}.type`, () => config.type);
    const load = typeof type === 'string' && Object.hasOwn(types, type) ? types[type] : undefined;
    if (!load) {
      throw new LockConfigError(
        `${field}.type`,
        `unknown backend type ${describe(type)}; known: ${Object.keys(types).join(', ')}`,
      );
    }
    const factory = await load();
    factory.validate(config, field);
    factories.set(name, factory);
  }

  // Every secret of every backend's configuration, known before anything can fail or log.
  const redactor = Redactor.of(backendsIn);
  const settings = { ...readSettings(options, names), redactor };
  const context: BackendContext = {
    resolve,
    redactor,
    keyPrefix: settings.keyPrefix,
    defaultTtl: settings.ttl,
  };
  const metrics = options.metrics === undefined ? true : checkBoolean(options.metrics, 'metrics');

  // Only now, with everything validated, touch the outside world.
  const otel = metrics ? await loadMetrics(redactor) : undefined;
  const backends = new Map<string, LockBackend>();
  try {
    for (const [name, factory] of factories) {
      backends.set(name, await startBackend(factory, backendsIn[name], name, context));
    }
  } catch (err) {
    await Promise.allSettled([...backends.values()].map((b) => b.close()));
    throw err;
  }
  return { settings: otel ? { ...settings, otel } : settings, backends };
}

/** The OpenTelemetry instruments; a broken `@opentelemetry/api` install names the option. */
async function loadMetrics(redactor: Redactor): Promise<OtelLockMetrics | undefined> {
  try {
    return await OtelLockMetrics.load();
  } catch (err) {
    throw new LockConfigError(
      'metrics',
      `@opentelemetry/api is installed but could not be loaded (${redactor.message(err)}); fix the install or set metrics: false`,
    );
  }
}

/** Builds one backend; a failure that is not already a `LockError` names the backend. */
async function startBackend(
  factory: BackendFactory<unknown>,
  config: unknown,
  name: string,
  context: BackendContext,
): Promise<LockBackend> {
  try {
    return await factory.create(config, name, context);
  } catch (err) {
    if (err instanceof LockError) throw err;
    throw new LockBackendError(name, `could not start: ${context.redactor.message(err)}`, {
      cause: context.redactor.error(err),
    });
  }
}

function readSettings(
  options: Record<string, unknown>,
  names: readonly string[],
): Omit<LockSettings, 'otel' | 'redactor'> {
  const defaultBackend = readDefaultBackend(options.defaultBackend, names);
  const defaults =
    options.defaults === undefined ? {} : checkOptions(options.defaults, DEFAULTS_KEYS, 'defaults');
  const keyPrefix = options.keyPrefix ?? '';
  if (typeof keyPrefix !== 'string' || keyPrefix.length > MAX_PREFIX_LENGTH) {
    throw new LockConfigError(
      'keyPrefix',
      `must be a string of at most ${MAX_PREFIX_LENGTH} characters`,
    );
  }
  checkKeyText(keyPrefix, 'keyPrefix');
  return {
    defaultBackend,
    keyPrefix,
    ttl: defaults.ttl === undefined ? DEFAULT_TTL_MS : checkTtl(defaults.ttl, 'defaults.ttl'),
    waitTimeout:
      defaults.waitTimeout === undefined
        ? DEFAULT_WAIT_TIMEOUT_MS
        : checkWait(defaults.waitTimeout, 'defaults.waitTimeout'),
    autoRenew:
      defaults.autoRenew === undefined
        ? true
        : checkBoolean(defaults.autoRenew, 'defaults.autoRenew'),
    maxHold:
      defaults.maxHold === undefined
        ? undefined
        : checkDuration(defaults.maxHold, 'defaults.maxHold'),
    operationTimeout:
      options.operationTimeout === undefined
        ? DEFAULT_OPERATION_TIMEOUT_MS
        : checkDuration(options.operationTimeout, 'operationTimeout'),
    shutdown: readShutdown(options.shutdown),
  };
}

/** `defaultBackend`: a configured name; optional when exactly one backend is configured. */
function readDefaultBackend(value: unknown, names: readonly string[]): string {
  if (value === undefined) {
    if (names.length > 1) {
      throw new LockConfigError(
        'defaultBackend',
        `required when several backends are configured (${names.join(', ')})`,
      );
    }
    return names[0];
  }
  if (typeof value !== 'string' || !names.includes(value)) {
    throw new LockConfigError(
      'defaultBackend',
      `must name a configured backend (${names.join(', ')})`,
    );
  }
  return value;
}

/** `shutdown: { inFlight, timeout }`, with defaults `'finish'` and 10 s. */
function readShutdown(input: unknown): ShutdownSettings {
  const shutdown = input === undefined ? {} : checkOptions(input, SHUTDOWN_KEYS, 'shutdown');
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
      : checkDuration(shutdown.timeout, 'shutdown.timeout');
  return { inFlight, timeout };
}
