import { afterAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { encodeKey } from '../../lib/backends/zookeeper/zk-paths';
import type { ZkClient, ZkModule } from '../../lib/backends/zookeeper/zk-types';
import { zkCode } from '../../lib/backends/zookeeper/zk-types';
import { LockConfigError } from '../../lib/index';
import { createLockApp } from '../support/lock-app';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';

const zk = createRequire(join(process.cwd(), 'package.json'))('node-zookeeper-client') as ZkModule;

afterAll(() => stopAllZk());

/** A raw client (no lock library), optionally authenticated. */
async function rawClient(connectString: string, credentials?: string): Promise<ZkClient> {
  const client = zk.createClient(connectString, { sessionTimeout: 4_000 });
  if (credentials) client.addAuthInfo('digest', Buffer.from(credentials));
  await new Promise<void>((resolve) => {
    client.once('connected', () => resolve());
    client.connect();
  });
  return client;
}

const call = <T>(fn: (cb: (err: unknown, result: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((err, result) => (err ? reject(err) : resolve(result))));

describe('zookeeper digest auth and ACLs', () => {
  it('lock nodes are creator-only: a foreign client can neither create under the root nor delete a lock node', async () => {
    const server = await startZkStandalone();
    const root = '/secured-locks';
    const t = await createLockApp({
      backends: {
        zk: {
          type: 'zookeeper',
          connectionString: server.connectString,
          rootPath: root,
          sessionTimeout: 4_000,
          auth: [{ scheme: 'digest', credentials: 'locker:s3cret' }],
        },
      },
    });
    const foreign = await rawClient(server.connectString);
    const wrongCreds = await rawClient(server.connectString, 'intruder:guess');
    const sameCreds = await rawClient(server.connectString, 'locker:s3cret');
    try {
      const lock = await t.locks.acquire('account-42');
      const dir = `${root}/${encodeKey('account-42')}`;
      const children = await call<string[]>((cb) => sameCreds.getChildren(dir, undefined, cb));
      expect(children).toHaveLength(1);
      const node = `${dir}/${children[0]}`;

      for (const intruder of [foreign, wrongCreds]) {
        const del = await call<void>((cb) =>
          intruder.remove(node, -1, (e) => cb(e, undefined)),
        ).catch((e: unknown) => e);
        expect(zkCode(del)).toBe(zk.Exception.NO_AUTH);
        const create = await call<string>((cb) =>
          intruder.create(
            `${dir}/_c_fake-lock-`,
            null,
            zk.ACL.OPEN_ACL_UNSAFE,
            zk.CreateMode.EPHEMERAL_SEQUENTIAL,
            cb,
          ),
        ).catch((e: unknown) => e);
        expect(zkCode(create)).toBe(zk.Exception.NO_AUTH);
        const createInRoot = await call<string>((cb) =>
          intruder.create(
            `${root}/k_other`,
            null,
            zk.ACL.OPEN_ACL_UNSAFE,
            zk.CreateMode.PERSISTENT,
            cb,
          ),
        ).catch((e: unknown) => e);
        expect(zkCode(createInRoot)).toBe(zk.Exception.NO_AUTH);
      }
      expect(lock.isHeld()).toBe(true);
      expect(await t.locks.isLocked('account-42')).toBe(true);
      await lock.release();
    } finally {
      for (const c of [foreign, wrongCreds, sameCreds]) c.close();
      await t.close();
      await server.destroy();
    }
  }, 60_000);

  it('rejects bad zookeeper options at bootstrap, naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ type: 'zookeeper' }, 'backends.z.connectionString'],
      [{ type: 'zookeeper', connectionString: 'a b' }, 'backends.z.connectionString'],
      [
        { type: 'zookeeper', connectionString: '127.0.0.1:1', rootPath: 'locks' },
        'backends.z.rootPath',
      ],
      [
        { type: 'zookeeper', connectionString: '127.0.0.1:1', rootPath: '/a/../b' },
        'backends.z.rootPath',
      ],
      [
        { type: 'zookeeper', connectionString: '127.0.0.1:1', sessionTimeout: 0 },
        'backends.z.sessionTimeout',
      ],
      [
        { type: 'zookeeper', connectionString: '127.0.0.1:1', auth: [{ scheme: 'digest' }] },
        'backends.z.auth[0]',
      ],
      [{ type: 'zookeeper', connectionString: '127.0.0.1:1', acl: 'creator' }, 'backends.z.acl'],
      [{ type: 'zookeeper', connectionString: '127.0.0.1:1', nope: true }, 'backends.z.nope'],
      // Found at volume (issue 17): these passed bootstrap, then every call failed.
      ...['/a\u0000b', '/a\u007fb', '/a\ufffeb', '/a/./b', '/🔒', '/a//b', '/a/'].map(
        (rootPath): [Record<string, unknown>, string] => [
          { type: 'zookeeper', connectionString: '127.0.0.1:1', rootPath },
          'backends.z.rootPath',
        ],
      ),
      ...[
        '../',
        '..',
        'h:0',
        'h:99999',
        'a,,b',
        '[::1]:2181',
        'h:2181/a/../b',
        'h:2181/\u0000',
      ].map((connectionString): [Record<string, unknown>, string] => [
        { type: 'zookeeper', connectionString },
        'backends.z.connectionString',
      ]),
      [
        { type: 'zookeeper', connectionString: '127.0.0.1:1', startup: 'sometimes' },
        'backends.z.startup',
      ],
    ];
    for (const [config, field] of cases) {
      const err = await createLockApp({ backends: { z: config as never } }).catch(
        (e: unknown) => e,
      );
      expect({ config, err }).toEqual({ config, err: expect.any(LockConfigError) });
      expect((err as LockConfigError).field).toBe(field);
    }
  });
});

describe('zookeeper key encoding', () => {
  it('maps every key to one valid, distinct znode name', () => {
    const keys = [
      'a',
      'A',
      '.',
      '..',
      'a/b',
      '/',
      '\u0000ctl\u0001',
      'ünï',
      '🔒',
      '%41',
      'k_x',
      'x'.repeat(10_000),
      'x'.repeat(10_001),
    ];
    const names = keys.map(encodeKey);
    expect(new Set(names).size).toBe(keys.length);
    for (const name of names) {
      expect(name).toMatch(/^(k_[A-Za-z0-9_%-]*|h_[A-Za-z0-9_-]{43})$/);
      expect(name.length).toBeLessThanOrEqual(202);
    }
  });
});
