/**
 * No secret of a Redis, Redis Cluster or Redlock configuration ever leaves the module: each
 * probe boots an app in its own process with one backend whose credential is the sentinel, drives
 * every public call, and everything the process wrote (Nest logs, ioredis's own stderr, every
 * error inspected at full depth) is searched for it. Against servers that want another password
 * (WRONGPASS), one whose password is the sentinel (every call succeeds: the handles and results
 * printed must not hold it either), and a closed port. The causes stay useful: the code and the
 * host:port are still there.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { LockBackendConfig } from '../../lib/backends/backend-config';
import {
  findFreePort,
  redisCommand,
  startRedisCluster,
  startRedisNodes,
  stopAll,
  type RedisClusterHandle,
  type RedisNode,
} from '../../servers/redis-servers';
import { leaks, runSecretProbe, SENTINEL, type ProbeResult } from './probe';

/** The password the servers want (the sentinel is the wrong one, except where it is right). */
const SERVER_PASSWORD = 'the-right-one';
const PROBE_MS = 90_000;

/** Requires `password` on a running node (the harness's readiness PING is unauthenticated). */
async function requirePassword(node: RedisNode, password: string): Promise<void> {
  expect(await redisCommand(node.port, 'CONFIG', 'SET', 'requirepass', password)).toBe('+OK\r\n');
}

/** The checks every probe gets: no sentinel anywhere, no raw ioredis stack on stderr. */
function expectNoLeak(result: ProbeResult): void {
  expect(leaks(result.output)).toEqual([]);
  expect(result.output).not.toContain('[ioredis] Unhandled error event');
  expect(result.output).toContain('PROBE close'); // the probe ran to its end
}

/** Every lock call failed with LOCK_BACKEND, its inspected error naming `reason`. */
function expectFailedWith(result: ProbeResult, reason: RegExp): void {
  for (const call of ['acquire', 'tryAcquire', 'withLock', 'isLocked', 'inspect']) {
    expect([call, result.codes[call]]).toEqual([call, 'LOCK_BACKEND']);
    expect(result.outcomes[call]).toMatch(reason);
  }
  expect(result.outcomes.health).toMatch(/status: 'down'/);
  expect(result.outcomes.health).toMatch(reason);
}

/**
 * Every call worked: the probe's `acquire` keeps its lock, so the calls after it find the key
 * busy (`withLock` gives up) until `forceRelease` frees it.
 */
function expectSucceeded(result: ProbeResult): void {
  expect(result.codes).toEqual({ withLock: 'LOCK_NOT_ACQUIRED' });
  expect(result.outcomes.acquire).toMatch(/^LockHandle/);
  expect(result.outcomes.inspect).toMatch(/held: true/);
  expect(result.outcomes.forceRelease).toMatch(/^true/);
  expect(result.outcomes.health).toMatch(/status: 'up'/);
}

/** Probes a Redis backend on `url`. */
function probeUrl(url: string, extra: { startup?: 'fail' } = {}): Promise<ProbeResult> {
  return runSecretProbe({ type: 'redis', url, restartGuard: false, ...extra });
}

afterAll(() => stopAll());

/** The servers the URL probes use: one wanting another password, one wanting the sentinel. */
interface ProbeServers {
  locked: RedisNode;
  open: RedisNode;
  closedPort: number;
}

/** Starts the {@link ProbeServers} (the locked one also has the ACL user `locker`, password `pw`). */
async function startProbeServers(): Promise<ProbeServers> {
  const [locked, open] = await startRedisNodes(2);
  // An ACL user whose password is not the sentinel (made before AUTH is required).
  expect(
    await redisCommand(locked.port, 'ACL', 'SETUSER', 'locker', 'on', '>pw', '~*', '&*', '+@all'),
  ).toBe('+OK\r\n');
  await requirePassword(locked, SERVER_PASSWORD);
  await requirePassword(open, SENTINEL);
  return { locked, open, closedPort: await findFreePort() };
}

/** The probes of a password in the URL, through `probe` (one client family). */
function urlProbes(
  servers: () => ProbeServers,
  probe: (url: string) => Promise<ProbeResult>,
): void {
  it(
    'a wrong password in the URL: WRONGPASS and the endpoint, never the password',
    async () => {
      const { locked } = servers();
      const result = await probe(`redis://:${SENTINEL}@127.0.0.1:${locked.port}`);
      expectNoLeak(result);
      expectFailedWith(result, /WRONGPASS/);
      expect(result.outcomes.acquire).toContain(`127.0.0.1:${locked.port}`);
    },
    PROBE_MS,
  );

  it(
    'the right password: every call succeeds, and nothing printed (handles included) holds it',
    async () => {
      const result = await probe(`redis://:${SENTINEL}@127.0.0.1:${servers().open.port}`);
      expectNoLeak(result);
      expectSucceeded(result);
    },
    PROBE_MS,
  );

  it(
    'a closed port, with a password in the URL: ECONNREFUSED and the port, never the password',
    async () => {
      const { closedPort } = servers();
      const result = await probe(`redis://:${SENTINEL}@127.0.0.1:${closedPort}`);
      expectNoLeak(result);
      expectFailedWith(result, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}`));
      expect(result.outcomes.acquire).toMatch(/code: 'ECONNREFUSED'/);
    },
    PROBE_MS,
  );
}

describe('secret probe: redis', () => {
  let servers: ProbeServers;

  beforeAll(async () => {
    servers = await startProbeServers();
  });

  urlProbes(
    () => servers,
    (url) => probeUrl(url),
  );

  // The other places a password goes: redisOptions, an ACL user's URL.
  const wrongPasswords: Array<[string, (port: number) => LockBackendConfig]> = [
    [
      'in redisOptions',
      (port) => ({
        type: 'redis',
        url: `redis://127.0.0.1:${port}`,
        redisOptions: { password: SENTINEL },
      }),
    ],
    [
      'of an ACL user, in the URL',
      (port) => ({ type: 'redis', url: `redis://locker:${SENTINEL}@127.0.0.1:${port}` }),
    ],
  ];
  it.each(wrongPasswords)(
    'a wrong password %s: WRONGPASS and the endpoint, never the password',
    async (_where, config) => {
      const result = await runSecretProbe(config(servers.locked.port));
      expectNoLeak(result);
      expectFailedWith(result, /WRONGPASS/);
      expect(result.outcomes.acquire).toContain(`127.0.0.1:${servers.locked.port}`);
    },
    PROBE_MS,
  );

  it(
    "startup 'fail' with a wrong password: bootstrap fails with WRONGPASS, never the password",
    async () => {
      const result = await probeUrl(`redis://:${SENTINEL}@127.0.0.1:${servers.locked.port}`, {
        startup: 'fail',
      });
      expect(leaks(result.output)).toEqual([]);
      expect(result.output).not.toContain('[ioredis] Unhandled error event');
      expect(result.codes.bootstrap).toBe('LOCK_BACKEND');
      expect(result.outcomes.bootstrap).toMatch(/WRONGPASS/);
    },
    PROBE_MS,
  );
});

/**
 * node-redis and iovalkey make, word and print their own errors their own way: the URL probes
 * through each, the module building its client from the same URL.
 */
const OTHER_DRIVERS: Array<[title: string, driver: 'redis' | 'iovalkey']> = [
  ['node-redis', 'redis'],
  ['iovalkey', 'iovalkey'],
];

describe.each(OTHER_DRIVERS)('secret probe: redis through %s', (_title, driver) => {
  let servers: ProbeServers;

  beforeAll(async () => {
    servers = await startProbeServers();
  });

  urlProbes(
    () => servers,
    (url) => runSecretProbe({ type: 'redis', url, driver, restartGuard: false }),
  );
});

describe('secret probe: redis cluster', () => {
  let cluster: RedisClusterHandle;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    // Client auth only: the cluster bus does not use it.
    for (const node of cluster.nodes) await requirePassword(node, SERVER_PASSWORD);
  }, 60_000);

  afterAll(() => cluster?.stop());

  it(
    'a wrong password in clusterOptions.redisOptions: WRONGPASS, never the password',
    async () => {
      const result = await runSecretProbe({
        type: 'redis',
        clusterNodes: cluster.seeds,
        clusterOptions: { redisOptions: { password: SENTINEL } },
      });
      expectNoLeak(result);
      expectFailedWith(result, /WRONGPASS/);
    },
    PROBE_MS,
  );

  it(
    'the right password: every call succeeds, and nothing printed holds it',
    async () => {
      const seeds = cluster.seeds.map((seed) =>
        seed.replace('redis://', `redis://:${SERVER_PASSWORD}@`),
      );
      // The sentinel is not the password here: the redactor must still know the seeds' one.
      const result = await runSecretProbe({
        type: 'redis',
        clusterNodes: seeds,
        clusterOptions: { redisOptions: { password: SERVER_PASSWORD } },
      });
      expect(result.output).not.toContain(SERVER_PASSWORD);
      expectSucceeded(result);
    },
    PROBE_MS,
  );
});

describe('secret probe: redlock', () => {
  let nodes: RedisNode[];
  let closedPorts: number[];

  beforeAll(async () => {
    nodes = await startRedisNodes(3);
    for (const node of nodes) await requirePassword(node, SERVER_PASSWORD);
    closedPorts = [await findFreePort(), await findFreePort(), await findFreePort()];
  });

  it(
    'wrong passwords in the URLs: every node says WRONGPASS, never the password',
    async () => {
      const config: LockBackendConfig = {
        type: 'redlock',
        restartGuard: false,
        urls: nodes.map((n) => `redis://:${SENTINEL}@127.0.0.1:${n.port}`),
        nodeTimeout: 500,
      };
      const result = await runSecretProbe(config);
      expectNoLeak(result);
      expectFailedWith(result, /no quorum, 0 of 3 nodes/);
      for (const node of nodes) expect(result.outcomes.acquire).toContain(`127.0.0.1:${node.port}`);
      expect(result.outcomes.acquire).toMatch(/WRONGPASS/);
    },
    PROBE_MS,
  );

  it(
    'closed ports, with passwords in the URLs: ECONNREFUSED per node, never the password',
    async () => {
      const result = await runSecretProbe({
        type: 'redlock',
        restartGuard: false,
        urls: closedPorts.map((port) => `redis://:${SENTINEL}@127.0.0.1:${port}`),
        nodeTimeout: 500,
      });
      expectNoLeak(result);
      expectFailedWith(result, /no quorum, 0 of 3 nodes/);
      for (const port of closedPorts) {
        expect(result.outcomes.acquire).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
      }
    },
    PROBE_MS,
  );

  it(
    'one node down at startup: no raw ioredis stack on stderr, the quorum grants',
    async () => {
      const result = await runSecretProbe({
        type: 'redlock',
        restartGuard: false,
        urls: [
          `redis://:${SERVER_PASSWORD}@127.0.0.1:${nodes[0].port}`,
          `redis://:${SERVER_PASSWORD}@127.0.0.1:${nodes[1].port}`,
          `redis://:${SENTINEL}@127.0.0.1:${closedPorts[0]}`,
        ],
        nodeTimeout: 500,
      });
      expect(leaks(result.output)).toEqual([]);
      expect(result.output).not.toContain(SERVER_PASSWORD);
      expect(result.output).not.toContain('[ioredis] Unhandled error event');
      // The down node is reported through the logger, once, redacted.
      expect(result.output).toContain(`node 127.0.0.1:${closedPorts[0]}: connect ECONNREFUSED`);
      expectSucceeded(result);
    },
    PROBE_MS,
  );

  it(
    'the right passwords (the sentinel): every call succeeds, and nothing printed holds it',
    async () => {
      const right = await startRedisNodes(3);
      try {
        for (const node of right) await requirePassword(node, SENTINEL);
        const result = await runSecretProbe({
          type: 'redlock',
          restartGuard: false,
          urls: right.map((n) => `redis://:${SENTINEL}@127.0.0.1:${n.port}`),
        });
        expectNoLeak(result);
        expectSucceeded(result);
      } finally {
        await Promise.all(right.map((n) => n.stop()));
      }
    },
    PROBE_MS,
  );
});
