import { afterEach, describe, expect, it } from '@jest/globals';
import { LockBackendError, type LockError, LockLostError } from '../../errors/lock.errors';
import type { LockBackend, LockBackendCapabilities } from '../contract/lock-backend';
import { Lease, type LeaseGrantInfo, type LeaseHost } from './lease';
import { RenewalScheduler } from './renewal-scheduler';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `condition` until it holds (within `ms`). */
async function until(condition: () => boolean, ms = 2_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await sleep(2);
  }
}

/** A store whose every call is recorded and answered by the test. */
class FakeStore implements LockBackend {
  capabilities: LockBackendCapabilities = { leaseBased: true, fencing: true, waiting: 'poll' };
  /** Each extend: when it was sent, the ttl asked for. */
  extends: Array<{ at: number; ttl: number }> = [];
  releases: string[] = [];
  /** How extend answers (default: yes, at once). */
  answerExtend: () => Promise<boolean> = async () => true;
  answerRelease: () => Promise<boolean> = async () => true;
  validity?: (ttl: number) => number;

  tryAcquire = async () => null;
  extend(key: string, token: string, ttl: number): Promise<boolean> {
    this.extends.push({ at: performance.now(), ttl });
    return this.answerExtend();
  }
  release(key: string, token: string): Promise<boolean> {
    this.releases.push(`${key} ${token}`);
    return this.answerRelease();
  }
  isLocked = async () => true;
  ping = async () => undefined;
  close = async () => undefined;
  leaseValidity(ttl: number): number {
    return this.validity ? this.validity(ttl) : ttl;
  }
}

/** Records what a lease reports to its engine. */
class FakeHost implements LeaseHost {
  ended = 0;
  lost: Array<{ reason: string; cause?: unknown }> = [];
  renewed = 0;
  errors: string[] = [];
  leaseEnded(): void {
    this.ended++;
  }
  reportLost(_lease: Lease, reason: string, cause?: unknown): void {
    this.lost.push({ reason, cause });
  }
  reportRenewed(): void {
    this.renewed++;
  }
  reportError(_lease: Lease, reason: string): void {
    this.errors.push(reason);
  }
  storeError(lease: Lease, what: string, error: unknown): LockError {
    return new LockBackendError(lease.info.backendName, `${what}: ${String(error)}`);
  }
}

const live: Lease[] = [];
afterEach(() => {
  // Stop every lease's timer: a leftover watchdog would call a store of a finished test.
  for (const lease of live.splice(0)) lease.markLost('test over');
});

/** A lease granted now, on `store`, with `info` overriding the defaults (ttl 300, autoRenew). */
function grant(store = new FakeStore(), info: Partial<LeaseGrantInfo> = {}) {
  const host = new FakeHost();
  const ttl = info.ttl ?? 300;
  const lease = new Lease(
    host,
    {
      backendName: 'b',
      backend: store,
      key: 'k',
      fullKey: 'p:k',
      token: 'tok',
      fence: 7,
      mode: 'exclusive',
      permits: 1,
      permit: 0,
      ttl,
      startedAt: performance.now(),
      validityMs: Lease.validityOf(store, ttl),
      autoRenew: true,
      lockAtLeastFor: 0,
      operationTimeout: 1_000,
      ...info,
    },
    new RenewalScheduler(store, info.operationTimeout ?? 1_000),
  );
  live.push(lease);
  return { lease, host, store };
}

describe('Lease watchdog', () => {
  it('renews every third of the validity (not of the ttl), to the ttl, moving the deadline', async () => {
    const store = new FakeStore();
    store.validity = () => 600; // e.g. a cap below a session timeout, on a 6 s ttl
    const { lease, host } = grant(store, { ttl: 6_000 });
    const started = performance.now();
    lease.start();
    await until(() => store.extends.length >= 2);
    const [first, second] = store.extends;
    expect(first.at - started).toBeGreaterThanOrEqual(199);
    expect(first.at - started).toBeLessThan(600); // ttl/3 would be 2 000
    expect(second.at - first.at).toBeGreaterThanOrEqual(199);
    expect(store.extends.map((e) => e.ttl)).toEqual([6_000, 6_000]);
    await until(() => host.renewed >= 2);
    // the deadline counts from the (latest) renewal's send time
    const last = store.extends[store.extends.length - 1];
    expect(lease.deadline).toBeLessThanOrEqual(last.at + 600);
    expect(lease.deadline).toBeGreaterThan(last.at + 595);
    expect(lease.isHeld()).toBe(true);
    expect(host.lost).toEqual([]);
  });

  it('a refused renewal marks the lease lost once, reports it and frees the store', async () => {
    const store = new FakeStore();
    store.answerExtend = async () => false;
    const { lease, host } = grant(store, { ttl: 90 });
    const signal = lease.signal;
    lease.start();
    await until(() => lease.state === 'lost');
    expect(host.lost).toEqual([{ reason: 'renewal refused: the lock is no longer ours' }]);
    expect(host.ended).toBe(1);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect((signal.reason as LockLostError).reason).toBe(
      'renewal refused: the lock is no longer ours',
    );
    expect(store.releases).toEqual(['p:k tok']);
    lease.markLost('again');
    expect(host.lost).toHaveLength(1);
    expect(host.ended).toBe(1);
    expect(lease.isHeld()).toBe(false);
  });

  it('a renewal that never answers is lost at the deadline, not before', async () => {
    const store = new FakeStore();
    store.answerExtend = () => new Promise<boolean>(() => undefined);
    const { lease, host } = grant(store, { ttl: 150, operationTimeout: 5_000 });
    const started = performance.now();
    lease.start();
    await until(() => lease.state === 'lost');
    expect(performance.now() - started).toBeGreaterThanOrEqual(149);
    expect(store.extends).toHaveLength(1);
    expect(host.lost).toHaveLength(1);
    expect(host.lost[0].reason).toMatch(/expired before it could be renewed/);
  });

  it('a failed renewal is reported and retried sooner; a later success keeps the lease', async () => {
    const store = new FakeStore();
    let calls = 0;
    store.answerExtend = async () => {
      if (++calls === 1) throw new Error('ECONNRESET');
      return true;
    };
    const { lease, host } = grant(store, { ttl: 3_000 });
    lease.start();
    await until(() => host.renewed >= 1, 5_000);
    expect(host.errors).toEqual(['renewal failed: ECONNRESET']);
    // retried after a third of what was left (about 667 ms), not a full period (1 s) later
    expect(store.extends[1].at - store.extends[0].at).toBeLessThan(1_000);
    expect(lease.isHeld()).toBe(true);
    expect(host.lost).toEqual([]);
  });

  it('a hand-over (short) lease is renewed to the ttl after a third of it, even with autoRenew off', async () => {
    const { lease, store, host } = grant(new FakeStore(), {
      ttl: 3_000,
      validityMs: 90,
      autoRenew: false,
    });
    const started = performance.now();
    lease.start(true);
    await until(() => host.renewed === 1);
    expect(store.extends).toHaveLength(1);
    expect(store.extends[0].ttl).toBe(3_000);
    expect(store.extends[0].at - started).toBeGreaterThanOrEqual(29);
    expect(lease.deadline).toBeGreaterThan(store.extends[0].at + 2_990);
    // autoRenew is off: that was the only renewal
    await sleep(150);
    expect(store.extends).toHaveLength(1);
    expect(lease.isHeld()).toBe(true);
  });
});

describe('Lease: one renewal in flight', () => {
  it('a renewal still waiting on a stalled store after its bound holds back the next one until it settles', async () => {
    const store = new FakeStore();
    let answer!: (ok: boolean) => void;
    let inFlight = 0;
    let most = 0;
    store.answerExtend = () => {
      inFlight++;
      most = Math.max(most, inFlight);
      return new Promise<boolean>((resolve) => {
        answer = (ok) => {
          inFlight--;
          resolve(ok);
        };
      });
    };
    // ttl 600: renewals every 200 ms; each call is bounded at 50 ms, then retried sooner.
    const { lease, host } = grant(store, { ttl: 600, operationTimeout: 50 });
    lease.start();
    await until(() => store.extends.length === 1);
    await sleep(350); // bound passed long ago, several retries would have been due
    expect(host.errors.length).toBeGreaterThanOrEqual(1); // the timeout was reported
    expect(store.extends).toHaveLength(1);
    answer(true); // the stalled request is answered at last: the next goes out
    await until(() => store.extends.length === 2);
    answer(true);
    expect(most).toBe(1);
    expect(lease.state).toBe('held');
  });

  it('extend() waits for a renewal in flight before sending its own', async () => {
    const store = new FakeStore();
    const answers: Array<(ok: boolean) => void> = [];
    store.answerExtend = () => new Promise<boolean>((resolve) => answers.push(resolve));
    const { lease } = grant(store, { ttl: 300, operationTimeout: 1_000 });
    lease.start();
    await until(() => store.extends.length === 1); // the watchdog's renewal, pending
    const extending = lease.extend(900);
    await sleep(30);
    expect(store.extends).toHaveLength(1);
    answers[0](true);
    await until(() => store.extends.length === 2);
    expect(store.extends[1].ttl).toBe(900);
    answers[1](true);
    await extending;
    expect(lease.ttl).toBe(900);
  });

  it('extend() fails (store error, lease kept) when the renewal in flight outlasts its bound', async () => {
    const store = new FakeStore();
    store.answerExtend = () => new Promise<boolean>(() => undefined);
    const { lease } = grant(store, { ttl: 3_000, operationTimeout: 60 });
    lease.start(true); // hand-over: renewed after a third of the validity (1 s)
    const first = lease.extend(3_000); // never answered
    await expect(first).rejects.toBeInstanceOf(LockBackendError);
    await expect(lease.extend(3_000)).rejects.toBeInstanceOf(LockBackendError);
    expect(store.extends).toHaveLength(1);
    expect(lease.state).toBe('held');
  });
});

describe('Lease deadline', () => {
  it('isHeld turns false at the deadline and marks the lease lost (no timer needed)', async () => {
    const { lease, host } = grant(new FakeStore(), { ttl: 60, autoRenew: false });
    const deadline = lease.deadline;
    while (lease.isHeld()) await sleep(1);
    expect(performance.now()).toBeGreaterThanOrEqual(deadline);
    expect(lease.state).toBe('lost');
    expect(host.lost).toEqual([{ reason: 'lease expired before it was renewed' }]);
  });

  it('without autoRenew, the started lease is lost by its timer at the deadline', async () => {
    const { lease, host, store } = grant(new FakeStore(), { ttl: 60, autoRenew: false });
    const signal = lease.signal;
    lease.start();
    await until(() => signal.aborted);
    expect(host.lost).toEqual([{ reason: 'lease expired (autoRenew is off)' }]);
    expect(store.extends).toEqual([]);
  });
});

describe('Lease.extend', () => {
  it('moves the deadline by the validity of the new ttl from the send time, not the reply', async () => {
    const store = new FakeStore();
    store.validity = (ttl) => ttl - 100;
    store.answerExtend = () => sleep(50).then(() => true);
    const { lease, host } = grant(store, { ttl: 300, autoRenew: false });
    lease.start();
    const sentBefore = performance.now();
    await lease.extend(1_000);
    expect(lease.ttl).toBe(1_000);
    expect(lease.deadline).toBeGreaterThanOrEqual(sentBefore + 900);
    expect(lease.deadline).toBeLessThan(sentBefore + 900 + 40); // the reply came 50 ms later
    expect(store.extends).toEqual([{ at: expect.any(Number), ttl: 1_000 }]);
    expect(host.renewed).toBe(1);
  });

  it('refused: rejects LockLostError and marks the lease lost', async () => {
    const store = new FakeStore();
    store.answerExtend = async () => false;
    const { lease, host } = grant(store, { autoRenew: false });
    const err = await lease.extend(500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockLostError);
    expect((err as LockLostError).reason).toBe('extend refused: the lock is no longer ours');
    expect(lease.state).toBe('lost');
    expect(host.lost).toHaveLength(1);
    expect(lease.signal.aborted).toBe(true);
  });

  it('a store failure rejects LockBackendError and keeps the lease', async () => {
    const store = new FakeStore();
    store.answerExtend = async () => {
      throw new Error('ETIMEDOUT');
    };
    const { lease, host } = grant(store, { autoRenew: false });
    const err = await lease.extend(500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockBackendError);
    expect(host.errors).toEqual(['extend failed']);
    expect(lease.state).toBe('held');
  });

  it('on a lease no longer held: rejects LockLostError without a store call', async () => {
    const { lease, store } = grant();
    lease.markLost('gone');
    await expect(lease.extend(500)).rejects.toBeInstanceOf(LockLostError);
    expect(store.extends).toEqual([]);
  });
});

describe('Lease.finish (lockAtLeastFor)', () => {
  const session: LockBackendCapabilities = { leaseBased: false, fencing: true, waiting: 'poll' };

  it('released: no lockAtLeastFor left, the store releases', async () => {
    const { lease, store, host } = grant();
    expect(await lease.finish('released')).toEqual({ outcome: 'released' });
    expect(store.releases).toEqual(['p:k tok']);
    expect(lease.state).toBe('released');
    expect(host.ended).toBe(1);
    expect(lease.signal.aborted).toBe(true);
  });

  it('lost: the store no longer had our token at release', async () => {
    const { lease, store } = grant();
    store.answerRelease = async () => false;
    expect(await lease.finish('released')).toEqual({ outcome: 'lost' });
  });

  it('kept: a lease store is extended to what is left of lockAtLeastFor, and not released', async () => {
    const { lease, store } = grant(new FakeStore(), { lockAtLeastFor: 5_000 });
    expect(await lease.finish('released')).toEqual({ outcome: 'kept' });
    expect(store.releases).toEqual([]);
    expect(store.extends).toHaveLength(1);
    expect(store.extends[0].ttl).toBeLessThanOrEqual(5_000);
    expect(store.extends[0].ttl).toBeGreaterThan(4_800);
  });

  it('kept: never for less than 100 ms (stores that subtract clock drift refuse tiny leases)', async () => {
    const { lease, store } = grant(new FakeStore(), { lockAtLeastFor: 20 });
    expect(await lease.finish('released')).toEqual({ outcome: 'kept' });
    expect(store.extends.map((e) => e.ttl)).toEqual([100]);
  });

  it('lost: the store refuses the extend that would keep it', async () => {
    const { lease, store } = grant(new FakeStore(), { lockAtLeastFor: 5_000 });
    store.answerExtend = async () => false;
    expect(await lease.finish('released')).toEqual({ outcome: 'lost' });
  });

  it('deferred: a session store is left for the engine to release later, with no store call', async () => {
    const store = new FakeStore();
    store.capabilities = session;
    const { lease } = grant(store, { lockAtLeastFor: 5_000 });
    const result = await lease.finish('released');
    expect(result).toEqual({ outcome: 'deferred', keepForMs: expect.any(Number) });
    const { keepForMs } = result as { keepForMs: number };
    expect(keepForMs).toBeLessThanOrEqual(5_000);
    expect(keepForMs).toBeGreaterThan(4_800);
    expect(store.extends).toEqual([]);
    expect(store.releases).toEqual([]);
    expect(lease.state).toBe('released');
  });

  it('lost: a lease already lost, or past its deadline, is not sent to the store', async () => {
    const lost = grant();
    lost.lease.markLost('gone');
    lost.store.releases = [];
    expect(await lost.lease.finish('released')).toEqual({ outcome: 'lost' });
    expect(lost.store.releases).toEqual([]);

    const expired = grant(new FakeStore(), { ttl: 20, autoRenew: false });
    await sleep(30);
    expect(await expired.lease.finish('released')).toEqual({ outcome: 'lost' });
    expect(expired.lease.state).toBe('lost');
    expect(expired.host.lost).toHaveLength(1);
  });
});

describe('Lease.signal', () => {
  it('created after the end, is already aborted with the same reason and cause', () => {
    const cause = new Error('session expired');
    const { lease } = grant();
    lease.markLost('the session ended', cause);
    const signal = lease.signal;
    expect(signal.aborted).toBe(true);
    const reason = signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason.reason).toBe('the session ended');
    expect(reason.cause).toBe(cause);
    expect(lease.signal).toBe(signal);
  });

  it('created before the end, is aborted by it with that reason', async () => {
    const { lease } = grant();
    const signal = lease.signal;
    expect(signal.aborted).toBe(false);
    await lease.finish('released');
    expect((signal.reason as LockLostError).reason).toBe('released');
  });
});
