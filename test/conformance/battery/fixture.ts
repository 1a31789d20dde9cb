/**
 * What every concern of the battery (and every core spec, on memory) shares for one target: its app (built once per target, in
 * `beforeAll`), the `LockService`, the raw backend, the key prefix, a unique-key helper and the
 * locks a test took (released after each test whatever happened, so a failure cannot leak a
 * held lock into the next test).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from '@jest/globals';
import type { LockBackendConfig } from '../../../lib/backends/backend-config';
import type { LockBackend, LockBackendCapabilities } from '../../../lib/core/contract/lock-backend';
import type { Lock, LockMetrics, LockOptions } from '../../../lib/lock.interfaces';
import type { LockService } from '../../../lib/lock.service';
import { LeaderService } from '../../../lib/leader/leader.service';
import { createLockApp, type LockTestApp } from '../../support/lock-app';
import { expectLockLost, expectNotAcquired } from '../../support/lock-checks';

/** One backend configuration the battery runs against. */
export interface ConformanceTarget {
  /** label used in describe() */
  name: string;
  /**
   * Creates a fresh backend config for one test app; called in beforeAll with the module's key
   * prefix the battery's apps use (a store user's permissions may name it).
   */
  setup(prefix: string): Promise<{ config: LockBackendConfig; teardown?: () => Promise<void> }>;
  /**
   * The battery's concerns to run (by name, e.g. `mutualExclusion`, `fencing`, `waiting`,
   * `lostLock`); absent: all of them. A target that runs a subset is one of several targets
   * of the same store, the full battery running on another.
   */
  concerns?: readonly ConcernName[];
  /**
   * What the backend is meant to declare. The battery asserts `backend.capabilities` equals
   * it, and every case that depends on a capability reads it from here, so a declaration can
   * never silently disagree with the behaviour. Every backend this library ships fences; how
   * the engine treats one that does not is a core spec (lib/core/engine/acquisition.spec.ts).
   */
  capabilities: LockBackendCapabilities & { readonly fencing: true };
  /** a ttl small enough for fast tests but safe for this backend (memory: 300) */
  shortTtl: number;
  /**
   * Optional: `true` when two app instances built from the same config share lock state (a real
   * server). Adds a case where contenders come from two apps. Never set for `memory`.
   */
  sharedAcrossApps?: boolean;
  /**
   * `true` when the backend answers `inspect` and `forceRelease` (the battery then checks them);
   * otherwise it checks that both are refused with `LockConfigError`.
   */
  admin?: boolean;
  /**
   * `true` when the backend renews many leases in one store call (`extendMany`); the battery
   * asserts the backend has it exactly then, and checks the batching.
   */
  batchedRenewal?: boolean;
}

/** The names of the battery's concerns (see `lock-conformance.ts`). */
export type ConcernName =
  | 'capabilities'
  | 'mutualExclusion'
  | 'leaseLifetime'
  | 'ownership'
  | 'fencing'
  | 'waiting'
  | 'cancellation'
  | 'multiKey'
  | 'lostLock'
  | 'renewalBatching'
  | 'health'
  | 'keyContent'
  | 'admin'
  | 'sharing'
  | 'leadership';

/** Name of the single backend every conformance app configures. */
export const BACKEND = 'b';
/** Generous bound for "at once" / "quickly" on a loaded 2-core machine. */
export const QUICK_MS = 1_000;

/**
 * Declares a case only where it applies to the backend. A case that does not apply is not
 * declared at all, so it can never show up as a skipped test counted alongside passing ones.
 */
export function when(applies: boolean): typeof it {
  return applies ? it : ((() => undefined) as unknown as typeof it);
}

/** The per-target state the cases share; its fields are set in `beforeAll`. */
export class LockFixture {
  readonly ttl: number;
  /** The module's key prefix: what the store sees is `prefix + key`. */
  readonly prefix = `conf-${randomUUID().slice(0, 8)}:`;
  config!: LockBackendConfig;
  locks!: LockService;
  backend!: LockBackend;
  private app?: LockTestApp;
  private teardown?: () => Promise<void>;
  /** Locks a test took; released after each test whatever happened. */
  private readonly taken: Lock[] = [];

  /** Registers the hooks that build and tear down the target's app in the current describe. */
  constructor(readonly target: ConformanceTarget) {
    this.ttl = target.shortTtl;
    beforeAll(async () => {
      const created = await target.setup(this.prefix);
      this.config = created.config;
      this.teardown = created.teardown;
      this.app = await this.newApp();
      this.locks = this.app.locks;
      this.backend = this.app.manager.getBackend(BACKEND);
    });
    afterEach(async () => {
      const pending = this.taken.splice(0);
      await Promise.all(pending.map((lock) => lock.release().catch(() => undefined)));
    });
    afterAll(async () => {
      try {
        await this.app?.close();
      } finally {
        await this.teardown?.();
      }
    });
  }

  /** Another app on the same config and prefix (the caller closes it). */
  newApp(): Promise<LockTestApp> {
    return createLockApp({ backends: { [BACKEND]: this.config }, keyPrefix: this.prefix });
  }

  /** A unique key per call, so tests never see each other's locks. */
  newKey(label: string): string {
    return `${label}-${randomUUID().slice(0, 8)}`;
  }

  /** The key as the store sees it. */
  full(key: string): string {
    return this.prefix + key;
  }

  track(lock: Lock): Lock {
    this.taken.push(lock);
    return lock;
  }

  async acquire(key: string | string[], opts?: LockOptions, service = this.locks): Promise<Lock> {
    return this.track(await service.acquire(key, opts));
  }

  async tryAcquire(key: string | string[], opts?: LockOptions): Promise<Lock | null> {
    const lock = await this.locks.tryAcquire(key, opts);
    return lock ? this.track(lock) : null;
  }

  /** The app's `LeaderService`. */
  leaders(): LeaderService {
    return this.app!.app.get(LeaderService);
  }

  metrics(): LockMetrics {
    return this.locks.getMetrics()[BACKEND];
  }

  /** Asserts whether anyone holds `key` (through the service). */
  async expectLocked(key: string, locked: boolean): Promise<void> {
    expect(await this.locks.isLocked(key)).toBe(locked);
  }

  /** `lock` holds `key` alone: it believes so, the store says so, and nobody else can take it. */
  async expectSoleHolder(lock: Lock, key: string): Promise<void> {
    expect(lock.isHeld()).toBe(true);
    await this.expectLocked(key, true);
    expect(await this.tryAcquire(key)).toBeNull();
  }

  /** Releases `lock` and checks that this freed `key`. */
  async releaseFrees(lock: Lock, key: string): Promise<void> {
    await lock.release();
    await this.expectLocked(key, false);
  }

  expectLockLost(reason: unknown, key: string): void {
    expectLockLost(reason, key, BACKEND);
  }

  expectNotAcquired(reason: unknown, key: string) {
    return expectNotAcquired(reason, key, BACKEND);
  }
}
