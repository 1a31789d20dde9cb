/**
 * ZooKeeper digest credentials never leave the module: a probe process (its own Nest logger on)
 * drives every public call with `auth` carrying the sentinel, against a root whose ACL refuses
 * that identity (another identity's, and the same user's with another password: both NO_AUTH),
 * against a closed port (default startup and `startup: 'fail'`), and with a scheme the server
 * does not know (AUTH_FAILED); everything it wrote, errors inspected at full depth included, is
 * searched for the sentinel. The causes stay useful: the ZooKeeper code name, host:port.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ZkClient, ZkModule } from '../../lib/backends/zookeeper/zk-types';
import type { ZookeeperBackendConfig } from '../../lib/backends/backend-config';
import { findFreePort } from '../../servers/child-processes';
import { startZkStandalone, stopAllZk, type ZkNode } from '../../servers/zk-servers';
import { leaks, runSecretProbe, SENTINEL } from './probe';

const zk = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as ZkModule;
const CALLS = ['acquire', 'tryAcquire', 'withLock', 'isLocked', 'inspect', 'forceRelease'];
const auth = [{ scheme: 'digest', credentials: `user:${SENTINEL}` }];

/** Creates `path` as `credentials` (digest), readable and writable by that identity only. */
async function createOwnedRoot(server: ZkNode, path: string, credentials: string): Promise<void> {
  const client: ZkClient = zk.createClient(server.connectString, { sessionTimeout: 4_000 });
  client.addAuthInfo('digest', Buffer.from(credentials));
  await new Promise<void>((resolve) => {
    client.once('connected', () => resolve());
    client.connect();
  });
  try {
    await new Promise<void>((resolve, reject) =>
      client.create(path, null, zk.ACL.CREATOR_ALL_ACL, zk.CreateMode.PERSISTENT, (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  } finally {
    client.close();
  }
}

describe('secret probe: zookeeper digest credentials', () => {
  let server: ZkNode;

  beforeAll(async () => {
    server = await startZkStandalone();
    await createOwnedRoot(server, '/owned-by-other', 'owner:owner-password');
    await createOwnedRoot(server, '/owned-by-user', 'user:the-right-password');
  }, 60_000);

  afterAll(() => stopAllZk());

  it.each([
    ['a root another identity owns', '/owned-by-other'],
    ['a root the same user created with another password', '/owned-by-user'],
  ])(
    'the ACL refuses the identity (%s): NO_AUTH, nothing leaks',
    async (_label, rootPath) => {
      const config: ZookeeperBackendConfig = {
        type: 'zookeeper',
        connectionString: server.connectString,
        rootPath,
        sessionTimeout: 4_000,
        auth,
      };
      const result = await runSecretProbe(config);
      expect(leaks(result.output)).toEqual([]);
      expect(result.codes.bootstrap).toBeUndefined();
      for (const call of ['acquire', 'tryAcquire', 'withLock']) {
        expect({ call, code: result.codes[call] }).toEqual({ call, code: 'LOCK_BACKEND' });
        expect(result.outcomes[call]).toContain('NO_AUTH');
      }
      expect(result.outcomes.health).toContain("status: 'up'");
    },
    90_000,
  );

  it('a closed port, default startup: CONNECTION_LOSS with host:port, nothing leaks', async () => {
    const port = await findFreePort();
    const result = await runSecretProbe({
      type: 'zookeeper',
      connectionString: `127.0.0.1:${port}`,
      connectTimeout: 500,
      auth,
    });
    expect(leaks(result.output)).toEqual([]);
    for (const call of CALLS) {
      expect({ call, code: result.codes[call] }).toEqual({ call, code: 'LOCK_BACKEND' });
      expect(result.outcomes[call]).toContain(`CONNECTION_LOSS: ECONNREFUSED 127.0.0.1:${port}`);
    }
    expect(result.outcomes.health).toContain(`CONNECTION_LOSS: ECONNREFUSED 127.0.0.1:${port}`);
    // The log says why too (the warning at bootstrap).
    expect(result.output).toMatch(/not reachable yet at 127\.0\.0\.1:\d+ \(.*ECONNREFUSED/);
  }, 90_000);

  it("a closed port, startup: 'fail': bootstrap rejects naming the cause, nothing leaks", async () => {
    const port = await findFreePort();
    const result = await runSecretProbe({
      type: 'zookeeper',
      connectionString: `127.0.0.1:${port}`,
      startup: 'fail',
      auth,
    });
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBe('LOCK_BACKEND');
    expect(result.outcomes.bootstrap).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
  }, 90_000);

  it('a scheme the server does not know: AUTH_FAILED, nothing leaks', async () => {
    const result = await runSecretProbe({
      type: 'zookeeper',
      connectionString: server.connectString,
      connectTimeout: 2_000,
      auth: [{ scheme: 'nope', credentials: `user:${SENTINEL}` }],
    });
    expect(leaks(result.output)).toEqual([]);
    for (const call of CALLS) {
      expect({ call, code: result.codes[call] }).toEqual({ call, code: 'LOCK_BACKEND' });
      expect(result.outcomes[call]).toContain('AUTH_FAILED');
    }
  }, 90_000);
});
