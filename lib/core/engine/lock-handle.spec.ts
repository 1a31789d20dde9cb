import { describe, expect, it, jest } from '@jest/globals';
import { LockConfigError, LockLostError } from '../../errors/lock.errors';
import type { Lease } from './lease';
import { LockHandle, type HandleHost } from './lock-handle';

/** The part of a lease a handle reads: its facts, state, signal, isHeld and extend. */
class StubLease {
  state: Lease['state'] = 'held';
  ttl = 1_000;
  readonly controller = new AbortController();
  readonly extend = jest.fn(async (_ttl: number) => undefined);
  constructor(readonly info: { key: string; token: string; fence: number | null }) {}
  get signal(): AbortSignal {
    return this.controller.signal;
  }
  isHeld(): boolean {
    return this.state === 'held';
  }
  /** The lease is lost (as the watchdog or a session loss would mark it). */
  lose(reason: string): LockLostError {
    const error = new LockLostError(this.info.key, 'b', reason);
    this.state = 'lost';
    this.controller.abort(error);
    return error;
  }
}

/** An engine whose release the test lets finish. */
function host() {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const releaseLeases = jest.fn((_leases: readonly Lease[]) => done);
  return { host: { releaseLeases } satisfies HandleHost, releaseLeases, finish };
}

const lease = (key = 'k', fence: number | null = 1) => new StubLease({ key, token: 'tok', fence });
const handle = (h: HandleHost, ...leases: StubLease[]) =>
  new LockHandle(h, leases as unknown as Lease[], 'b');

describe('LockHandle', () => {
  it('reads key, keys, token and fences from its leases in order', () => {
    const h = handle(host().host, lease('a', 3), lease('b', 9));
    expect(h.keys).toEqual(['a', 'b']);
    expect(h.key).toBe('a,b');
    expect(h.token).toBe('tok');
    expect(h.fences).toEqual([3, 9]);
    expect(h.fence).toBe(3);
    expect(h.backend).toBe('b');
  });

  it('isHeld: false once released, or once any lease is not held', async () => {
    const [a, b] = [lease('a'), lease('b')];
    const isHeldA = jest.spyOn(a, 'isHeld');
    const h = handle(host().host, a, b);
    expect(h.isHeld()).toBe(true);
    b.lose('gone');
    expect(h.isHeld()).toBe(false);
    // every lease is asked, so each passed deadline is noticed
    isHeldA.mockClear();
    expect(h.isHeld()).toBe(false);
    expect(isHeldA).toHaveBeenCalledTimes(1);
    const fresh = handle(host().host, lease());
    void fresh.release();
    expect(fresh.isHeld()).toBe(false);
  });

  it('has a signal of its own, aborted on its release, not on a sibling re-entry release', () => {
    const shared = lease();
    const h = host();
    const outer = handle(h.host, shared);
    const inner = handle(h.host, shared);
    const [outerSignal, innerSignal] = [outer.signal, inner.signal];
    expect(outerSignal).not.toBe(innerSignal);
    void inner.release();
    expect(innerSignal.aborted).toBe(true);
    expect(innerSignal.reason).toBeInstanceOf(LockLostError);
    expect((innerSignal.reason as LockLostError).reason).toBe('released');
    expect(outerSignal.aborted).toBe(false);
    expect(shared.signal.aborted).toBe(false);
  });

  it("aborts every handle's signal on a lease loss, with the lease's reason", () => {
    const [a, b] = [lease('a'), lease('b')];
    const h = host();
    const both = handle(h.host, a, b);
    const onlyB = handle(h.host, b);
    const [bothSignal, onlyBSignal] = [both.signal, onlyB.signal];
    const error = b.lose('renewal refused');
    expect(bothSignal.reason).toBe(error);
    expect(onlyBSignal.reason).toBe(error);
    // a signal first read after the loss is aborted already
    expect(handle(h.host, a, b).signal.reason).toBe(error);
    // and a loss after the handle's release no longer changes its signal
    const later = lease();
    const released = handle(h.host, later);
    const releasedSignal = released.signal;
    void released.release();
    later.lose('too late');
    expect((releasedSignal.reason as LockLostError).reason).toBe('released');
  });

  it('a lease lost before the release stays the reason of a signal read afterwards', () => {
    const lost = lease();
    const h = handle(host().host, lost);
    const error = lost.lose('session expired');
    void h.release();
    expect(h.signal.aborted).toBe(true);
    expect(h.signal.reason).toBe(error);

    const fine = handle(host().host, lease());
    void fine.release();
    expect((fine.signal.reason as LockLostError).reason).toBe('released');
  });

  it('release is idempotent: concurrent and repeated calls share the one real release', async () => {
    const h = host();
    const [a, b] = [lease('a'), lease('b')];
    const lock = handle(h.host, a, b);
    const first = lock.release();
    const second = lock.release();
    expect(second).toBe(first);
    expect(h.releaseLeases).toHaveBeenCalledTimes(1);
    expect(h.releaseLeases).toHaveBeenCalledWith([a, b]);
    expect(lock.isReleased).toBe(true);
    let settled = false;
    void first.then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false); // waits for the engine's release
    h.finish();
    await expect(first).resolves.toBeUndefined();
    await expect(lock.release()).resolves.toBeUndefined();
    await lock[Symbol.asyncDispose]();
    expect(h.releaseLeases).toHaveBeenCalledTimes(1);
  });

  it('extend checks the ttl, renews every lease, and refuses after release', async () => {
    const [a, b] = [lease('a'), lease('b')];
    b.ttl = 2_000;
    const lock = handle(host().host, a, b);
    for (const bad of [0, -1, NaN, Infinity, '5' as unknown as number]) {
      const err = await lock.extend(bad).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockConfigError);
      expect((err as LockConfigError).field).toBe('ttl');
    }
    expect(a.extend).not.toHaveBeenCalled();
    await lock.extend(500);
    expect(a.extend.mock.calls).toEqual([[500]]);
    expect(b.extend.mock.calls).toEqual([[500]]);
    await lock.extend(); // each lease keeps its own ttl
    expect(a.extend.mock.calls[1]).toEqual([1_000]);
    expect(b.extend.mock.calls[1]).toEqual([2_000]);
    void lock.release();
    const err = await lock.extend(500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockLostError);
    expect((err as LockLostError).reason).toBe('already released');
    expect(a.extend).toHaveBeenCalledTimes(2);
  });
});
