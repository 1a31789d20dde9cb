/**
 * LeaderService as two instances of an application see it (two Nest apps in one process, each
 * its own module and client) on every store backend: one leads at a time, terms rise, resigning
 * and shutting down hand over within a second, `leader()` and `observe()` tell any instance who
 * leads, and bad input is refused before any I/O.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { LeaderService } from '../../lib/leader/leader.service';
import type { LeadershipEvent } from '../../lib/leader/leader-events';
import { LockConfigError } from '../../lib/errors/lock.errors';
import type { LockModuleOptions } from '../../lib/lock.module-options';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { typeormTarget } from '../conformance/typeorm.targets';
import { aborted, within } from '../support/async';
import { createLockApp, type LockTestApp } from '../support/lock-app';
import { redlockSetup, type StoreSetup, zookeeperStandaloneSetup } from '../support/store-setups';

const apps: LockTestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((t) => t.close()));
});

/** Every store backend, each on a store of its own or shared. */
const TARGETS: Array<[string, () => Promise<StoreSetup>]> = [
  [
    'redis',
    async () => ({ config: { type: 'redis', url: MACHINE_REDIS_URL, restartGuard: false } }),
  ],
  ['redlock', redlockSetup],
  ['zookeeper', zookeeperStandaloneSetup],
  ['typeorm table on postgres', () => typeormTarget('postgres', 'table').setup('leader')],
  ['typeorm table on mariadb', () => typeormTarget('mariadb', 'table').setup('leader')],
  ['typeorm table on sqlite', () => typeormTarget('sqlite', 'table').setup('leader')],
  // Session strategies: the leader's owner row names it while its session holds the lock.
  ['typeorm advisory on postgres', () => typeormTarget('postgres', 'advisory').setup('leader')],
  ['typeorm for-update on mariadb', () => typeormTarget('mariadb', 'for-update').setup('leader')],
];

describe.each(TARGETS)('LeaderService on %s, two instances', (_name, setup) => {
  let store: StoreSetup;
  beforeAll(async () => {
    store = await setup();
  }, 60_000);
  afterAll(() => store?.teardown?.());

  /** One instance: an app named `id` on the target's store under `prefix`. */
  async function instance(id: string, prefix: string): Promise<LeaderService> {
    const options: LockModuleOptions = {
      backends: { main: store.config as LockBackendConfig },
      keyPrefix: prefix,
      defaults: { ttl: 3_000 },
      leaderId: id,
    };
    const t = await createLockApp(options);
    apps.push(t);
    return t.app.get(LeaderService);
  }

  it('one leads; the other waits, leads within a second of a resign, with a higher term', async () => {
    const prefix = `leader-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const b = await instance('b', prefix);
    expect(a.id).toBe('a');

    const first = await a.campaign('billing', { value: 'http://a:3000' });
    expect(first.isLeader()).toBe(true);
    expect(first.term).toBeGreaterThan(0);
    expect(await b.leader('billing')).toEqual({
      id: 'a',
      value: 'http://a:3000',
      term: first.term,
    });
    // The holder's token is the right to release: LockService.inspect never shows it.
    const locks = apps[1].locks;
    const info = await locks.inspect('nestjs-distributed-lock:leader:billing');
    expect(info).toMatchObject({ held: true, fence: first.term, mine: false });
    expect(info).not.toHaveProperty('owner');

    const second = b.campaign('billing');
    let bLeads = false;
    void second.then(() => (bLeads = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(bLeads).toBe(false);

    const resignedAt = performance.now();
    await first.resign();
    const next = await within(second, 1_000, 'the next candidate to lead');
    expect(performance.now() - resignedAt).toBeLessThan(1_000);
    expect(first.isLeader()).toBe(false);
    expect(first.signal.aborted).toBe(true);
    expect(next.isLeader()).toBe(true);
    expect(next.term).toBeGreaterThan(first.term);
    expect(await a.leader('billing')).toEqual({ id: 'b', term: next.term });

    await expect(first.resign()).rejects.toMatchObject({ code: 'LOCK_CONFIG', field: 'resign' });
    await next.resign();
    expect(await a.leader('billing')).toBeNull();
  });

  it('shutting down the leader hands over within a second', async () => {
    const prefix = `leader-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const b = await instance('b', prefix);
    const lead = await a.campaign('jobs');
    const waiting = b.campaign('jobs');
    const closedAt = performance.now();
    await apps[0].close();
    expect(lead.signal.aborted).toBe(true);
    const next = await within(waiting, 1_000, 'the next candidate to lead');
    expect(performance.now() - closedAt).toBeLessThan(1_000);
    expect(next.term).toBeGreaterThan(lead.term);
    await expect(a.campaign('jobs')).rejects.toMatchObject({ code: 'LOCK_SHUTTING_DOWN' });
  });

  it('tells its listeners of each grant and end: a resignation as such, a loss as lost', async () => {
    const prefix = `leader-${randomUUID()}:`;
    const a = await instance('a', prefix);
    await instance('b', prefix);
    const events: LeadershipEvent[] = [];
    const off = a.on('granted', (e) => void events.push(e));
    a.on('ended', (e) => void events.push(e));
    // A failing listener is logged and changes nothing for the others.
    a.on('granted', () => {
      throw new Error('listener bug');
    });

    const first = await a.campaign('events');
    expect(events).toEqual([
      { type: 'granted', name: 'events', backend: 'main', term: first.term, id: 'a' },
    ]);
    await first.resign();
    expect(events[1]).toEqual({
      type: 'ended',
      name: 'events',
      backend: 'main',
      term: first.term,
      id: 'a',
      lost: false,
      reason: 'released',
    });

    off();
    const second = await a.campaign('events');
    // Taken away behind its back (another instance forces the lock free): reported as lost.
    expect(await apps[1].locks.forceRelease('nestjs-distributed-lock:leader:events')).toBe(true);
    await within(aborted(second.signal), 5_000, 'the leader to notice its loss');
    expect(events).toHaveLength(3);
    expect(events[2]).toMatchObject({ type: 'ended', term: second.term, lost: true });
    expect(events[2].reason).not.toBe('released');
    // Nobody leads now (a record the lost leader left names no one), and the next one is named.
    const b = apps[1].app.get(LeaderService);
    expect(await b.leader('events')).toBeNull();
    const third = await b.campaign('events');
    expect(await a.leader('events')).toEqual({ id: 'b', term: third.term });
    await third.resign();
    expect(() => a.on('elected' as never, () => undefined)).toThrow(
      expect.objectContaining({ field: 'event' }),
    );
  });

  it('leader() of a name whose lock was taken directly (not by a campaign) cannot name a leader', async () => {
    const prefix = `leader-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const lock = await apps[0].locks.acquire('nestjs-distributed-lock:leader:direct');
    await expect(a.leader('direct')).rejects.toMatchObject({ code: 'LOCK_BACKEND' });
    await lock.release();
    expect(await a.leader('direct')).toBeNull();
  });

  it('observe() sees each leader in order, terms rising, and nobody after the last resign', async () => {
    const prefix = `leader-${randomUUID()}:`;
    const a = await instance('a', prefix);
    const b = await instance('b', prefix);
    const stop = new AbortController();
    const seen: Array<string | null> = [];
    const terms: number[] = [];
    const watching = (async () => {
      for await (const change of b.observe('report', { signal: stop.signal, interval: 50 })) {
        seen.push(change?.id ?? null);
        if (change) terms.push(change.term);
      }
    })();
    await new Promise((r) => setTimeout(r, 200));
    const one = await a.campaign('report');
    await new Promise((r) => setTimeout(r, 300));
    const waiting = b.campaign('report');
    await one.resign();
    const two = await waiting;
    await new Promise((r) => setTimeout(r, 300));
    await two.resign();
    await new Promise((r) => setTimeout(r, 300));
    stop.abort();
    await within(watching, 2_000, 'observe to end on its signal');
    // Nobody leads before, nor after the last resign; between the two leaders a poll may catch
    // the instant of the hand-over when nobody does.
    expect([seen[0], seen.at(-1)]).toEqual([null, null]);
    expect(seen.filter((id) => id !== null)).toEqual(['a', 'b']);
    expect(seen.length).toBeLessThanOrEqual(5);
    expect(terms[1]).toBeGreaterThan(terms[0]);
  });
});

describe('LeaderService: bad input, before any I/O', () => {
  it('refuses names, ttl, values and options with LockConfigError naming the field', async () => {
    const t = await createLockApp({ backends: { local: { type: 'memory' } } });
    apps.push(t);
    const leaders = t.app.get(LeaderService);
    const refused = async (call: () => Promise<unknown>, field: string) => {
      const error = await call().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(LockConfigError);
      expect(error).toMatchObject({ field });
    };
    await refused(() => leaders.campaign(''), 'name');
    await refused(() => leaders.campaign('x'.repeat(257)), 'name');
    await refused(() => leaders.campaign(42 as never), 'name');
    await refused(() => leaders.campaign('n', { ttl: 500 }), 'ttl');
    await refused(() => leaders.campaign('n', { ttl: Number.NaN }), 'ttl');
    await refused(() => leaders.campaign('n', { value: 'v'.repeat(257) }), 'value');
    await refused(() => leaders.campaign('n', { value: '' }), 'value');
    await refused(() => leaders.campaign('n', { backend: 'nope' }), 'backend');
    await refused(() => leaders.campaign('n', { colour: 'red' } as never), 'options.colour');
    await refused(() => leaders.leader(''), 'name');
    expect(() => leaders.observe('')).toThrow(LockConfigError);
    expect(() => leaders.observe('n', { interval: -1 })).toThrow(LockConfigError);
    // Nothing was taken: the name is free.
    expect(await leaders.leader('n')).toBeNull();
  });

  it('refuses a bad leaderId at bootstrap', async () => {
    const failed = await createLockApp({
      backends: { local: { type: 'memory' } },
      leaderId: '',
    }).then(
      async (t) => {
        await t.close();
        return undefined;
      },
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(LockConfigError);
    expect(failed).toMatchObject({ field: 'leaderId' });
  });
});
