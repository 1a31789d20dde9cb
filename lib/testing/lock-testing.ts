import { randomBytes } from 'node:crypto';
import type { LockEngine } from '../core/engine/lock-engine';
import { validateKey } from '../core/settings/validation';
import { checkOptions } from '../core/shared/options';
import { LockConfigError } from '../errors/lock.errors';
import { encodeLabel, leaderKey } from '../leader/leader-label';
import type { LockEvent, LockEventName } from '../lock.interfaces';
import { isStagedStore } from '../core/contract/staged-store';

/** What happened to a key, as `LockTesting.history` records it. */
export interface LockHistoryEntry {
  /** `busy`: found held by someone else; `failed`: the store call failed. */
  readonly event: 'acquired' | 'released' | 'lost' | 'busy' | 'failed';
  /** The grant's fence, where the event concerns one. */
  readonly fence: number | null;
  /** When it happened (`Date.now()`, so Jest's fake clock where it is installed). */
  readonly at: number;
}

/** Options of the `LockTesting` calls that name a key. */
export interface LockTestingKeyOptions {
  /** The backend (default: the module's default backend). */
  backend?: string;
}

const RECORDED: Record<string, LockHistoryEntry['event'] | undefined> = {
  acquired: 'acquired',
  released: 'released',
  lost: 'lost',
  contended: 'busy',
  error: 'failed',
};
const KEY_OPTIONS: ReadonlySet<string> = new Set(['backend']);

/** The engine of the most recently built testing module, for `LockTesting.assertLocked`. */
let latest: LockEngine | undefined;

/**
 * Stages, in a test, what other instances and the store would do to the code under test, on
 * the testing module's in-memory store (`LockTestingModule`), and records what happened.
 */
export class LockTesting {
  private readonly records = new Map<string, LockHistoryEntry[]>();

  /** Built by `LockTestingModule` (inject it). */
  private constructor(private readonly engine: LockEngine) {
    latest = engine;
    for (const name of Object.keys(RECORDED) as LockEventName[]) {
      engine.on(name, (event) => this.record(event));
    }
  }

  /** @internal */
  static of(engine: LockEngine): LockTesting {
    return new LockTesting(engine);
  }

  /**
   * Throws unless the calling code runs inside a `withLock`/`@Locked` scope that holds `key` now
   * (without a key: any lock). For code under test: `LockTesting.assertLocked('stock:' + sku)`.
   */
  static assertLocked(key?: string): void {
    if (key !== undefined) validateKey(key);
    if (latest?.holdsInScope(key)) return;
    throw new Error(
      key === undefined
        ? 'expected to run under a lock, and no lock is held here'
        : `expected to run under the lock of "${key}", and it is not held here`,
    );
  }

  /**
   * `key` is busy as if another instance held it, until the returned function is called (a
   * holder here keeps its lock: the key must be free, else `LockConfigError`).
   */
  async holdElsewhere(key: string, options?: LockTestingKeyOptions): Promise<() => Promise<void>> {
    return this.elsewhere(validateKey(key), otherToken(), false, options);
  }

  /** The holders of `key` in this process lose it now (their `signal` aborts, `LockLostError`). */
  loseLock(key: string, options?: LockTestingKeyOptions): number {
    const { backend, fullKey } = this.target(validateKey(key), options);
    return backend.loseAll(fullKey, 'lost (LockTesting.loseLock)');
  }

  /** The next acquisition of `key` fails with `LockBackendError` (its cause: `error`). */
  failNext(
    key: string,
    error = new Error('store failure staged by LockTesting.failNext'),
    options?: LockTestingKeyOptions,
  ): void {
    const { backend, fullKey } = this.target(validateKey(key), options);
    backend.failNext(fullKey, error);
  }

  /** What happened to `key` (on any backend) since the module started, in order. */
  history(key: string): readonly LockHistoryEntry[] {
    return [...(this.records.get(validateKey(key)) ?? [])];
  }

  /**
   * Another instance (id `elsewhere`, or `id`) leads `name` until the returned function is
   * called; a leadership this instance had is lost at once.
   */
  async leadElsewhere(
    name: string,
    options?: LockTestingKeyOptions & { id?: string; value?: string },
  ): Promise<() => Promise<void>> {
    const key = leaderKey(name);
    const { id = 'elsewhere', value, ...rest } = options ?? {};
    const token = `${otherToken()}.${encodeLabel(id, value)}`;
    return this.elsewhere(key, token, true, rest);
  }

  private async elsewhere(
    key: string,
    token: string,
    seize: boolean,
    options?: LockTestingKeyOptions,
  ): Promise<() => Promise<void>> {
    const { backend, fullKey } = this.target(key, options);
    if (!(await backend.holdElsewhere(fullKey, token, seize))) {
      throw new LockConfigError('key', `"${key}" is held here: release it before holdElsewhere`);
    }
    let freed = false;
    return async () => {
      if (freed) return;
      freed = true;
      await backend.freeElsewhere(fullKey, token);
    };
  }

  private target(key: string, options?: LockTestingKeyOptions) {
    const opts = options === undefined ? {} : checkOptions(options, KEY_OPTIONS, 'options');
    const { name, backend } = this.engine.backendOf(opts);
    if (!isStagedStore(backend)) {
      throw new LockConfigError(
        'backend',
        `backend "${name}" is not the testing store: import LockTestingModule, not LockModule`,
      );
    }
    return { backend, fullKey: this.engine.settings.keyPrefix + key };
  }

  private record(event: LockEvent): void {
    const kind = RECORDED[event.type];
    if (kind === undefined) return;
    const list = this.records.get(event.key) ?? [];
    list.push({ event: kind, fence: event.fence ?? null, at: Date.now() });
    this.records.set(event.key, list);
  }
}

/** A token of "another instance" (the shape of the engine's own: 32 hex digits). */
function otherToken(): string {
  return randomBytes(16).toString('hex');
}
