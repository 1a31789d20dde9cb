/**
 * The Redis client port contract, written once and run by one spec per client family (ioredis 5
 * and 6, iovalkey, node-redis 4, 5 and 6), each against one redis-server and a 3-master Cluster:
 * RESP2-shaped replies, reply errors as RedisReplyError, batches, plain commands, a subscriber
 * that survives a restart, connection events in the port's vocabulary, and a close that leaves
 * nothing open. The ports under test are the module's own (client-builder) and, for what only a
 * user's client shows (its own error listeners, a client not connected yet), portOf's.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { types } from 'node:util';
import {
  buildClient,
  buildCluster,
  type RedisDriver,
} from '../../lib/backends/redis/port/client-builder';
import { portOf } from '../../lib/backends/redis/port/client-ports';
import {
  isReplyError,
  RedisReplyError,
  script,
  type RedisPort,
} from '../../lib/backends/redis/port/redis-port';
import { findFreePort, redisCommand } from '../../servers/redis-servers';
import { eventually, settle, within } from '../support/async';
import {
  EventLog,
  expectNothingLeftOpen,
  openResources,
  startPortServers,
  type PortServers,
} from './port-servers';

/** A client library under the contract. */
export interface PortFamily {
  /** In test titles: `node-redis 4`. */
  readonly title: string;
  /** The builder's driver for it. */
  readonly driver: RedisDriver;
  /** The package the driver's name loads here (an npm alias of another version), if not its own. */
  readonly packageName?: string;
  /** The `family` its ports report. */
  readonly family: string;
  /** Library options that stop its clients queueing commands while disconnected. */
  readonly noOfflineQueue: { readonly single: object; readonly cluster: object };
  /** Library options every client of the run gets (a protocol version). */
  readonly options?: { readonly single?: object; readonly cluster?: object };
  /**
   * What a call on a client its user has not connected yet does: node-redis rejects it ("The
   * client is closed"), ioredis with `lazyConnect` connects.
   */
  readonly beforeConnect: 'rejects' | 'connects';
  /** A client made as its user would, not connected yet. */
  userClient(servers: PortServers): UserClient;
}

/** A client the test makes as a user would (see {@link PortFamily.userClient}). */
export interface UserClient {
  readonly client: unknown;
  connect(): Promise<void>;
  /** Adds an error listener of the user's. */
  onError(listener: (err: unknown) => void): void;
  close(): Promise<void>;
}

/** Runs the contract for `family`, on one node and on a Cluster. */
export function describeRedisPortContract(family: PortFamily): void {
  describe(`${family.title} port, single node`, () => contract(family, false));
  describe(`${family.title} port, Cluster`, () => contract(family, true));
}

/** Enough for a Cluster to be told its nodes are back (ioredis waits for cluster_state:ok). */
const RECOVERY_MS = 15_000;

const SHAPES = script(`return {1, 'two', false, {3, 'x', {}}, tonumber(ARGV[1]), KEYS[1]}`);
const NIL = script(`return nil`);
const RAISES = script(`return error({err='FOO bar'})`);
const PUSHES = script(`return redis.call('LPUSH', KEYS[1], 'y')`);
/** Refuses when asked to, else INCRBY (an error reply raised by Redis on a non-number). */
const COUNTER = script(
  `if ARGV[1] == 'refuse' then return redis.error_reply('REFUSED ' .. KEYS[1]) end
   return {KEYS[1], redis.call('INCRBY', KEYS[1], ARGV[2])}`,
);

function contract(family: PortFamily, cluster: boolean): void {
  let servers: PortServers;
  let port: RedisPort;
  const tag = randomUUID().slice(0, 8);
  const key = (name: string): string => `port:${tag}:${name}`;
  const extra = (cluster ? family.options?.cluster : family.options?.single) ?? {};

  const loader = (name: string): Promise<unknown> =>
    import(name === family.driver && family.packageName ? family.packageName : name);
  /** A port the module makes, to `urls` (the servers' by default). */
  const build = (options: object = {}, urls = servers.urls): Promise<RedisPort> => {
    const common = {
      driver: family.driver,
      options: { ...extra, ...options },
      field: 'backends.test',
      usedFor: 'the port contract',
      loader,
    };
    return cluster ? buildCluster({ ...common, urls }) : buildClient({ ...common, url: urls[0] });
  };
  const whenReady = async (p: RedisPort): Promise<void> =>
    eventually(() => p.isReady(), RECOVERY_MS, `${p.endpoint} to be ready`);

  beforeAll(async () => {
    servers = await startPortServers(cluster);
    port = await build();
    await whenReady(port);
  });
  afterAll(async () => {
    await port?.close();
    await servers?.stop();
  });

  it('names its family, its kind and its endpoint', () => {
    expect(port.family).toBe(family.family);
    expect(port.cluster).toBe(cluster);
    if (!cluster) {
      expect(port.endpoint).toBe(`127.0.0.1:${servers.nodes[0].port}`);
    } else {
      expect(port.endpoint).toMatch(/^cluster /);
      for (const node of servers.nodes) expect(port.endpoint).toContain(`127.0.0.1:${node.port}`);
    }
  });

  it('evalScript: RESP2-shaped replies, loading a script the server has not seen', async () => {
    await servers.everyNode('SCRIPT', 'FLUSH');
    const reply = await port.evalScript(SHAPES, [key('shapes')], [42]);
    expect(reply).toEqual([1, 'two', null, [3, 'x', []], 42, key('shapes')]);
    expect(await servers.everyNode('SCRIPT', 'EXISTS', SHAPES.sha)).toContain('*1\r\n:1\r\n');
    expect(await port.evalScript(NIL, [key('nil')], [])).toBeNull();
  });

  it('a script error and WRONGTYPE reject with RedisReplyError carrying the server message', async () => {
    const raised = await settle(port.evalScript(RAISES, [key('raises')], []));
    expect(raised.ok).toBe(false);
    const error = (raised as { error: Error }).error;
    expect(error).toBeInstanceOf(RedisReplyError);
    expect(error.message).toMatch(/^FOO bar/);
    expect(isReplyError(error)).toBe(true);

    await port.command(['SET', key('string'), 'x'], key('string'));
    for (const call of [
      () => port.command(['LPUSH', key('string'), 'y'], key('string')),
      () => port.evalScript(PUSHES, [key('string')], []),
    ]) {
      const outcome = await settle(call());
      expect(outcome.ok).toBe(false);
      expect((outcome as { error: Error }).error).toBeInstanceOf(RedisReplyError);
      expect((outcome as { error: Error }).error.message).toMatch(/^WRONGTYPE /);
    }
  });

  it('evalBatch: one result per call in order, replies and reply errors mixed, after SCRIPT FLUSH', async () => {
    await servers.everyNode('FLUSHALL');
    await servers.everyNode('SCRIPT', 'FLUSH');
    const keys = Array.from({ length: 60 }, (_, i) => key(`batch:${i}`));
    const notNumber = (i: number): boolean => i % 7 === 3;
    const refused = (i: number): boolean => i % 5 === 0;
    for (const [i, k] of keys.entries()) {
      if (notNumber(i)) await port.command(['SET', k, 'not a number'], k);
    }
    const calls = keys.map((k, i) => ({ keys: [k], args: [refused(i) ? 'refuse' : 'go', i] }));
    const results = await port.evalBatch(COUNTER, calls);
    expect(results).toHaveLength(calls.length);
    results.forEach((result, i) => {
      if (refused(i)) {
        expect(result).toBeInstanceOf(RedisReplyError);
        expect((result as Error).message).toBe(`REFUSED ${keys[i]}`);
      } else if (notNumber(i)) {
        expect(result).toBeInstanceOf(RedisReplyError);
        expect((result as Error).message).toMatch(/not an integer/);
      } else {
        expect(result).toEqual([keys[i], i]);
      }
    });
    if (cluster) {
      // The calls went to every node of the Cluster (each holds some of the keys now).
      const sizes = (await servers.everyNode('DBSIZE')).map((r) => Number(r.slice(1)));
      expect(sizes.filter((n) => n > 0)).toHaveLength(servers.nodes.length);
    }
  });

  it('evalBatch: calls that all get a reply error resolve, one error each; none is []', async () => {
    const calls = [1, 2, 3].map((i) => ({ keys: [key(`refused:${i}`)], args: ['refuse', i] }));
    const results = await port.evalBatch(COUNTER, calls);
    expect(results.map((r) => (r as Error).message)).toEqual(
      calls.map((c) => `REFUSED ${c.keys[0]}`),
    );
    expect(await port.evalBatch(COUNTER, [])).toEqual([]);
  });

  it('command: EXISTS, PING and INFO as RESP2 replies', async () => {
    await port.command(['SET', key('here'), '1'], key('here'));
    expect(await port.command(['EXISTS', key('here')], key('here'))).toBe(1);
    expect(await port.command(['EXISTS', key('absent')], key('absent'))).toBe(0);
    expect(await port.command(['PING'])).toBe('PONG');
    const info = await port.command(['INFO', 'server']);
    expect(typeof info).toBe('string');
    expect(info).toContain('uptime_in_seconds:');
  });

  it('queuesOffline: as the client options say', async () => {
    expect(port.queuesOffline).toBe(true);
    const strict = await build(
      cluster ? family.noOfflineQueue.cluster : family.noOfflineQueue.single,
    );
    try {
      await whenReady(strict);
      expect(strict.queuesOffline).toBe(false);
    } finally {
      await strict.close();
    }
  });

  it("userErrorListeners: the user's error listeners, not the port's", async () => {
    const user = family.userClient(servers);
    const userPort = portOf(user.client)!;
    try {
      expect(userPort.userErrorListeners()).toBe(0);
      const unwatch = userPort.watch({ ready() {}, error() {}, closed() {}, ended() {} });
      expect(userPort.userErrorListeners()).toBe(0);
      user.onError(() => undefined);
      expect(userPort.userErrorListeners()).toBe(1);
      unwatch();
      expect(userPort.userErrorListeners()).toBe(1);
    } finally {
      await user.close();
    }
  });

  it('a client its user has not connected yet: not ready, then ready once connected', async () => {
    const user = family.userClient(servers);
    const userPort = portOf(user.client)!;
    expect(userPort.family).toBe(family.family === 'iovalkey' ? 'ioredis' : family.family);
    expect(userPort.cluster).toBe(cluster);
    const log = new EventLog(userPort);
    try {
      expect(userPort.isReady()).toBe(false);
      if (family.beforeConnect === 'rejects') {
        const early = await settle(userPort.command(['PING']));
        expect(early.ok).toBe(false);
        expect(String((early as { error: unknown }).error)).toMatch(/closed|not connected/i);
        expect(userPort.isReady()).toBe(false);
      }
      await user.connect();
      await log.next('ready', 0);
      await whenReady(userPort);
      expect(await userPort.command(['PING'])).toBe('PONG');
    } finally {
      log.stop();
      await user.close();
    }
  });

  it('watch: error while nothing listens, not ready; ended once closed, nothing left open', async () => {
    const before = openResources();
    const free = await Promise.all(servers.urls.map(() => findFreePort()));
    const refused = await build(
      {},
      free.map((p) => `redis://127.0.0.1:${p}`),
    );
    const log = new EventLog(refused);
    const error = await log.next('error', 0);
    expect(error.ready).toBe(false);
    expect(types.isNativeError(error.err)).toBe(true);
    if (!cluster) expect((error.err as { code?: unknown }).code).toBe('ECONNREFUSED');
    expect(refused.isReady()).toBe(false);
    const mark = log.seen.length;
    await refused.close();
    await log.next('ended', mark);
    expect(refused.isReady()).toBe(false);
    log.stop();
    await expectNothingLeftOpen(before);
  });

  it('close(): ended, not ready, its subscriber closed too, nothing left open', async () => {
    const before = openResources();
    const own = await build();
    await whenReady(own);
    const log = new EventLog(own);
    expect(await own.command(['PING'])).toBe('PONG');
    expect(await own.evalBatch(COUNTER, [{ keys: [key('own')], args: ['go', 1] }])).toEqual([
      [key('own'), 1],
    ]);
    const sub = own.subscriber();
    await within(
      sub.subscribe(key('own-channel'), () => undefined),
      10_000,
      'SUBSCRIBE',
    );
    await sub.close();
    await own.close();
    await log.next('ended', 0);
    expect(own.isReady()).toBe(false);
    expect(sub.isReady()).toBe(false);
    log.stop();
    await expectNothingLeftOpen(before);
  });

  it('an outage: error and closed, not ready while down; ready after; the subscriber hears again', async () => {
    const log = new EventLog(port);
    const failFast = cluster
      ? undefined
      : await buildClient({
          url: servers.urls[0],
          driver: family.driver,
          options: extra,
          failFast: { nodeTimeout: 500 },
          field: 'backends.test',
          usedFor: 'the port contract',
          loader,
        });
    const sub = port.subscriber();
    const subLog = new EventLog(sub);
    const heard: string[] = [];
    const channel = key('channel');
    try {
      await within(
        sub.subscribe(channel, (m) => heard.push(m)),
        10_000,
        'SUBSCRIBE',
      );
      // Its channel only: a message elsewhere, then one on it (in this order from one node).
      await redisCommand(servers.nodes[0].port, 'PUBLISH', key('elsewhere'), 'other');
      await redisCommand(servers.nodes[0].port, 'PUBLISH', channel, 'before');
      await eventually(() => heard.length > 0, 10_000, 'the message before the outage');
      expect(heard).toEqual(['before']);

      if (failFast) await whenReady(failFast);
      expect(failFast?.queuesOffline ?? false).toBe(false);
      const mark = log.seen.length;
      await servers.down();
      // A Cluster stays ready while one of its nodes is: not ready once the last one fails.
      await log.next('error', mark, RECOVERY_MS, (e) => !e.ready);
      await log.next('closed', mark);
      expect(port.isReady()).toBe(false);
      if (failFast) {
        // A Redlock node does not queue: a call while down fails at once.
        const started = performance.now();
        expect((await settle(failFast.command(['PING']))).ok).toBe(false);
        expect(performance.now() - started).toBeLessThan(1_000);
      }

      await servers.up();
      await log.next('ready', mark, RECOVERY_MS);
      expect(port.isReady()).toBe(true);
      expect(await port.command(['PING'])).toBe('PONG');
      // The restarted servers have no scripts: loaded again.
      expect(await port.evalScript(SHAPES, [key('again')], [7])).toEqual([
        1,
        'two',
        null,
        [3, 'x', []],
        7,
        key('again'),
      ]);
      await eventually(() => sub.isReady(), RECOVERY_MS, 'the subscriber to be ready again');
      for (let i = 0; !heard.includes('after'); i++) {
        expect(i).toBeLessThan(100); // ~10 s
        await redisCommand(servers.nodes[0].port, 'PUBLISH', channel, 'after');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const subMark = subLog.seen.length;
      await sub.close();
      await subLog.next('ended', subMark);
      expect(sub.isReady()).toBe(false);
    } finally {
      log.stop();
      subLog.stop();
      await sub.close();
      await failFast?.close();
    }
  }, 60_000);
}
