import type {
  GrantRequest,
  LockGrant,
  LockLossListener,
  QueuedRequest,
} from '../../core/contract/lock-backend';
import type { StagedStore } from '../../core/contract/staged-store';
import { MemoryLockBackend } from './memory.backend';

/** A lease "another instance" holds: longer than any test runs (the longest timer). */
const ELSEWHERE_TTL_MS = 2_147_483_647;

/**
 * `type: 'testing'`, the testing kit's store (`LockTestingModule` configures it): the memory
 * backend, plus what a test needs to stage what other instances and the store would do (see
 * {@link StagedStore}). Keys here carry the module's `keyPrefix`, as every backend's do.
 */
export class TestingLockBackend extends MemoryLockBackend implements StagedStore {
  /** Tokens this process was granted and has not released, by key. */
  private readonly granted = new Map<string, Set<string>>();
  /** Keys whose next acquisition fails, with the error it fails with. */
  private readonly failing = new Map<string, Error>();
  private readonly lossListeners: LockLossListener[] = [];

  override async tryAcquire(request: GrantRequest): Promise<LockGrant | null> {
    this.failIfAsked(request.key);
    return this.noted(request, await super.tryAcquire(request));
  }

  override async acquire(request: QueuedRequest): Promise<LockGrant | null> {
    this.failIfAsked(request.key);
    return this.noted(request, await super.acquire(request));
  }

  override async release(key: string, token: string): Promise<boolean> {
    this.granted.get(key)?.delete(token);
    return super.release(key, token);
  }

  onLost(listener: LockLossListener): void {
    this.lossListeners.push(listener);
  }

  /**
   * Takes `key` for a holder of its own (`token`) as another instance would, first taking it
   * from this process's holders (each told of the loss) when `seize`. Resolves `false` when
   * the key is busy and not seized.
   */
  async holdElsewhere(key: string, token: string, seize: boolean): Promise<boolean> {
    if (seize) this.loseAll(key, 'taken by another instance (LockTesting)');
    const grant = await super.tryAcquire({ key, token, ttlMs: ELSEWHERE_TTL_MS });
    return grant !== null;
  }

  /** Ends the hold of `token` taken by `holdElsewhere`. */
  async freeElsewhere(key: string, token: string): Promise<void> {
    await super.release(key, token);
  }

  /** Every holder of `key` in this process loses it now; how many did. */
  loseAll(key: string, reason: string): number {
    const tokens = [...(this.granted.get(key) ?? [])];
    this.granted.delete(key);
    if (tokens.length === 0) return 0;
    // Gone from the store first, so a renewal cannot find it again.
    void this.forceRelease(key);
    for (const token of tokens)
      for (const listener of this.lossListeners) listener(key, token, reason);
    return tokens.length;
  }

  /** The next acquisition of `key` (a try or a wait) fails with `error`. */
  failNext(key: string, error: Error): void {
    this.failing.set(key, error);
  }

  private failIfAsked(key: string): void {
    const error = this.failing.get(key);
    if (error === undefined) return;
    this.failing.delete(key);
    throw error;
  }

  private noted(request: GrantRequest, grant: LockGrant | null): LockGrant | null {
    if (grant === null) return null;
    const tokens = this.granted.get(request.key);
    if (tokens) tokens.add(request.token);
    else this.granted.set(request.key, new Set([request.token]));
    return grant;
  }
}
