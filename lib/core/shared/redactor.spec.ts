import { createRequire } from 'node:module';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { Redactor, RedactedError, secretsIn } from './redactor';

const SENTINEL = 'S3ntinel-Secret';

describe('Redactor', () => {
  const config = {
    main: { type: 'redis', url: `redis://:${SENTINEL}-url@127.0.0.1:6390` },
    acl: { type: 'redis', url: 'redis://127.0.0.1', redisOptions: { password: `${SENTINEL}-pw` } },
    zk: { type: 'zookeeper', auth: [{ scheme: 'digest', credentials: `alice:${SENTINEL}-zk` }] },
    db: {
      type: 'typeorm',
      dataSourceOptions: { type: 'postgres', password: `${SENTINEL}-pg` },
      dataSourceToken: 'DataSource',
    },
    // A client passed in: its secrets sit in its options.
    client: {
      type: 'redis',
      client: new (class Client {
        options = { password: `${SENTINEL}-c` };
      })(),
    },
  };

  it('finds the password of a pg Pool (kept off its enumerable options) and of mysql2 pools', async () => {
    // Real driver objects (dev dependencies), made but never connected.
    const load = createRequire(join(process.cwd(), 'package.json'));
    const { Pool } = load('pg') as { Pool: new (o: object) => { end(): Promise<void> } };
    const mysql2 = load('mysql2') as {
      createPool(o: object): { end(): void; promise(): { end(): Promise<void> } };
    };
    const pg = new Pool({ host: '127.0.0.1', password: `${SENTINEL}-pgpool` });
    const callback = mysql2.createPool({ host: '127.0.0.1', password: `${SENTINEL}-mysql2` });
    const promise = mysql2
      .createPool({ host: '127.0.0.1', password: `${SENTINEL}-promise` })
      .promise();
    try {
      const secrets = secretsIn({
        a: { client: pg },
        b: { client: callback },
        c: { client: promise },
      });
      for (const suffix of ['pgpool', 'mysql2', 'promise'])
        expect(secrets).toContain(`${SENTINEL}-${suffix}`);
    } finally {
      await pg.end();
      callback.end();
      await promise.end();
    }
  });

  it('finds secret-named values, URL passwords, digest passwords and client options', () => {
    const secrets = secretsIn(config);
    for (const suffix of ['url', 'pw', 'pg', 'c'])
      expect(secrets).toContain(`${SENTINEL}-${suffix}`);
    expect(secrets).toContain(`${SENTINEL}-zk`);
    expect(secrets).toContain(`alice:${SENTINEL}-zk`);
    // Names of things are not secrets: a DI token stays readable.
    expect(secrets).not.toContain('DataSource');
  });

  it('scrubs known secrets and any URL password from text', () => {
    const redactor = Redactor.of(config);
    const text = redactor.text(
      `AUTH ${SENTINEL}-pw failed; redis://:${SENTINEL}-url@h:1 and postgres://u:other@h/db, alice:${SENTINEL}-zk`,
    );
    expect(text).not.toContain(SENTINEL);
    expect(text).not.toContain('other');
    expect(text).toContain('redis://:***@h:1');
    expect(text).toContain('postgres://u:***@h/db');
  });

  it('turns a client error into a copy with only data-free fields, cause chain included', () => {
    const redactor = Redactor.of(config);
    const reply = Object.assign(new Error(`WRONGPASS ${SENTINEL}-pw`), {
      name: 'ReplyError',
      command: { name: 'auth', args: [`${SENTINEL}-pw`] },
      code: 'WRONGPASS',
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), {
        code: 'ECONNREFUSED',
        address: '127.0.0.1',
        port: 6390,
        options: { password: `${SENTINEL}-pw` },
      }),
    });
    const safe = redactor.error(reply)!;
    expect(safe).toBeInstanceOf(RedactedError);
    expect(safe).toMatchObject({ name: 'ReplyError', code: 'WRONGPASS' });
    expect(safe.cause).toMatchObject({ code: 'ECONNREFUSED', address: '127.0.0.1', port: 6390 });
    expect(inspect(safe, { depth: Infinity, showHidden: true })).not.toContain(SENTINEL);
    expect(redactor.error(undefined)).toBeUndefined();
    expect(redactor.error('plain string')).toMatchObject({ message: 'plain string' });
  });
});

describe('what util.inspect can reach', () => {
  it('a redactor never prints its secrets', () => {
    const redactor = new Redactor([SENTINEL]);
    expect(inspect(redactor, { depth: Infinity, showHidden: true })).not.toContain(SENTINEL);
  });
});
