import { afterEach, describe, expect, it } from '@jest/globals';
import { LockBackendError, type LockError, LockLostError } from '../../errors/lock.errors';
import type { GrantRequest, LockBackend, LockBackendCapabilities } from '../contract/lock-backend';
import { Lease, type LeaseHost } from './lease';
import { RenewalScheduler } from './renewal-scheduler';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(condition: () => boolean, ms = 3_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await sleep(2);
  }
}

/** A store that batches renewals and records each batch; answers per token. */
class BatchStore implements LockBackend {
  capabilities: LockBackendCapabilities = { leaseBased: true, fencing: true, waiting: 'poll' };
  batches: Array<{ at: number; requests: readonly GrantRequest[] }> = [];
  singles = 0;
  /** Per-token answer (default true). */
  answer: (request: GrantRequest) => boolean | Error = () => true;
  /** When set, the whole batch call rejects with it. */
  reject?: Error;
  releases: string[] = [];

  tryAcquire = async () => null;
  async extend(): Promise<boolean> {
    this.singles++;
    return true;
  }
  async extendMany(requests: readonly GrantRequest[]): Promise<readonly (boolean | Error)[]> {
    this.batches.push({ at: performance.now(), requests });
    if (this.reject) throw this.reject;
    return requests.map((r) => this.answer(r));
  }
  async release(key: string, token: string): Promise<boolean> {
    this.releases.push(token);
    return true;
  }
  isLocked = async () => true;
  ping = async () => undefined;
  close = async () => undefined;
}

class Host implements LeaseHost {
  lost: Array<{ token: string; reason: string }> = [];
  renewed = new Map<string, number>();
  errors: Array<{ token: string; reason: string }> = [];
  leaseEnded(): void {}
  reportLost(lease: Lease, reason: string): void {
    this.lost.push({ token: lease.info.token, reason });
  }
  reportRenewed(lease: Lease): void {
    this.renewed.set(lease.info.token, (this.renewed.get(lease.info.token) ?? 0) + 1);
  }
  reportError(lease: Lease, reason: string): void {
    this.errors.push({ token: lease.info.token, reason });
  }
  storeError(lease: Lease, what: string, error: unknown): LockError {
    return new LockBackendError(lease.info.backendName, `${what}: ${String(error)}`);
  }
}

const live: Lease[] = [];
const schedulers: RenewalScheduler[] = [];
afterEach(() => {
  for (const lease of live.splice(0)) lease.markLost('test over');
  for (const s of schedulers.splice(0)) s.close();
});

function setup(store: BatchStore | LockBackend) {
  const host = new Host();
  const scheduler = new RenewalScheduler(store, 1_000);
  schedulers.push(scheduler);
  const lease = (token: string, ttl = 300, autoRenew = true): Lease => {
    const l = new Lease(
      host,
      {
        backendName: 'b',
        backend: store,
        key: `k-${token}`,
        fullKey: `p:k-${token}`,
        token,
        fence: 1,
        mode: 'exclusive',
        permits: 1,
        permit: 0,
        ttl,
        startedAt: performance.now(),
        validityMs: ttl,
        autoRenew,
        lockAtLeastFor: 0,
        operationTimeout: 1_000,
      },
      scheduler,
    );
    live.push(l);
    l.start();
    return l;
  };
  return { host, scheduler, lease };
}

describe('RenewalScheduler', () => {
  it('renews leases started at different times together: a few batches per period, not one call per lease', async () => {
    const store = new BatchStore();
    const { lease, host } = setup(store);
    const leases: Lease[] = [];
    // 60 leases (ttl 300: renewal every 100 ms) started over 100 ms: 60 different phases.
    for (let i = 0; i < 60; i++) {
      leases.push(lease(`t${i}`));
      await sleep(100 / 60);
    }
    await sleep(700);
    // Every lease was renewed several times and none was lost...
    expect(host.lost).toEqual([]);
    for (const l of leases) {
      expect(l.isHeld()).toBe(true);
      expect(host.renewed.get(l.info.token) ?? 0).toBeGreaterThanOrEqual(4);
    }
    // ...in batches: after the first period they settle into one cohort. One call per lease per
    // renewal would be at least 60 × 6 = 360 calls in 700 ms; allow two batches per period.
    expect(store.batches.length).toBeLessThanOrEqual(2 * 8 + 4);
    const sizes = store.batches.slice(-4).map((b) => b.requests.length);
    expect(Math.max(...sizes)).toBe(60);
    // each lease is renewed at most once per batch, with its own token and ttl
    for (const b of store.batches) {
      expect(new Set(b.requests.map((r) => r.token)).size).toBe(b.requests.length);
      for (const r of b.requests)
        expect(r).toEqual({
          key: `p:k-${r.token}`,
          token: r.token,
          ttlMs: 300,
          mode: 'exclusive',
          permits: 1,
        });
    }
    expect(store.singles).toBe(0);
  });

  it('never renews a lease later than its own period, nor earlier than half of it', async () => {
    const store = new BatchStore();
    const { lease } = setup(store);
    const a = lease('a', 600); // period 200 ms
    await sleep(70);
    lease('b', 300); // period 100 ms: its ticks come inside a's window now and then
    await sleep(900);
    const times = store.batches
      .filter((b) => b.requests.some((r) => r.token === 'a'))
      .map((b) => b.at);
    expect(times.length).toBeGreaterThanOrEqual(4);
    let previous = a.acquiredAt;
    for (const t of times) {
      expect(t - previous).toBeLessThanOrEqual(200 + 25); // timers may fire a little late
      expect(t - previous).toBeGreaterThanOrEqual(100 - 2);
      previous = t;
    }
  });

  it('a refused renewal loses only its own lease (signal aborted, released); the batch keeps the others', async () => {
    const store = new BatchStore();
    store.answer = (r) => r.token !== 'gone';
    const { lease, host } = setup(store);
    const keep = lease('keep');
    const gone = lease('gone');
    const signal = gone.signal;
    await until(() => gone.state === 'lost');
    expect(host.lost).toEqual([
      { token: 'gone', reason: 'renewal refused: the lock is no longer ours' },
    ]);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect(store.releases).toEqual(['gone']);
    await until(() => (host.renewed.get('keep') ?? 0) >= 3);
    expect(keep.isHeld()).toBe(true);
    expect(keep.signal.aborted).toBe(false);
  });

  it('an Error for one lease is reported for it and retried; a rejected batch is retried for all, and the deadline still holds', async () => {
    const store = new BatchStore();
    let failures = 1;
    store.answer = (r) => (r.token === 'flaky' && failures-- > 0 ? new Error('slot moved') : true);
    const { lease, host } = setup(store);
    // ttl 900, not the default 300: the retry after the error must land inside the lease even
    // when a loaded CI machine stalls this process's timers for a few hundred ms.
    const flaky = lease('flaky', 900);
    const steady = lease('steady', 900);
    await until(() => (host.renewed.get('flaky') ?? 0) >= 1);
    expect(host.errors).toEqual([{ token: 'flaky', reason: 'renewal failed: slot moved' }]);
    expect(flaky.isHeld()).toBe(true);
    // Now the store stops answering at all: every lease reports errors, then is lost at its
    // deadline (not before, not never).
    store.reject = new Error('ECONNREFUSED');
    await until(() => flaky.state === 'lost' && steady.state === 'lost', 4_000);
    expect(
      host.errors.filter((e) => e.reason === 'renewal failed: ECONNREFUSED').length,
    ).toBeGreaterThanOrEqual(2);
    expect(host.lost.map((l) => l.reason)).toEqual([
      expect.stringMatching(/expired before it could be renewed/),
      expect.stringMatching(/expired before it could be renewed/),
    ]);
  });

  it('checks deadlines of leases without autoRenew on the same timer', async () => {
    const store = new BatchStore();
    const { lease, host, scheduler } = setup(store);
    const short = lease('short', 120, false);
    const long = lease('long', 600);
    await until(() => short.state === 'lost');
    expect(performance.now() - short.acquiredAt).toBeGreaterThanOrEqual(119);
    expect(host.lost).toEqual([{ token: 'short', reason: 'lease expired (autoRenew is off)' }]);
    expect(store.batches.every((b) => b.requests.every((r) => r.token !== 'short'))).toBe(true);
    expect(long.isHeld()).toBe(true);
    expect(scheduler.size).toBe(1);
  });

  it('falls back to one extend per lease when the backend has no extendMany', async () => {
    const store = new BatchStore();
    const single: LockBackend = {
      capabilities: store.capabilities,
      tryAcquire: store.tryAcquire,
      extend: () => store.extend(),
      release: (k, t) => store.release(k, t),
      isLocked: store.isLocked,
      ping: store.ping,
      close: store.close,
    };
    const { lease, host } = setup(single);
    lease('x');
    lease('y');
    await until(() => (host.renewed.get('x') ?? 0) >= 2 && (host.renewed.get('y') ?? 0) >= 2);
    expect(store.singles).toBeGreaterThanOrEqual(4);
    expect(store.batches).toEqual([]);
  });

  it('a loss whose listener ends the next lease on the list mid-tick leaves the rest watched and renewed', async () => {
    const store = new BatchStore();
    const { lease, host, scheduler } = setup(store);
    const steady = lease('steady', 600);
    const victim = lease('victim', 600);
    // Watched last, so checked first: its loss ends `victim`, the lease checked after it.
    const short = lease('short', 120, false);
    const report = host.reportLost.bind(host);
    host.reportLost = (l, reason) => {
      report(l, reason);
      if (l === short) victim.markLost('its owner gave up with short');
    };
    await until(() => short.state === 'lost');
    expect(victim.state).toBe('lost');
    expect(scheduler.size).toBe(1);
    const before = host.renewed.get('steady') ?? 0;
    await until(() => (host.renewed.get('steady') ?? 0) >= before + 2);
    expect(steady.isHeld()).toBe(true);
    expect(host.lost.map((l) => l.token)).toEqual(['short', 'victim']);
  });

  it('forgets released leases; a closed scheduler renews nothing', async () => {
    const store = new BatchStore();
    const { lease, scheduler } = setup(store);
    const a = lease('a');
    await a.finish('done');
    expect(scheduler.size).toBe(0);
    await sleep(250);
    expect(store.batches).toEqual([]);
    lease('b');
    scheduler.close();
    await sleep(250);
    expect(store.batches).toEqual([]);
  });
});
