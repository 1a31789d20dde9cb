/**
 * The typeorm backend never writes a database secret: a wrong MariaDB password (a real server
 * refusing it), a password in a connection URL (a closed port), a DataSource passed in, and a
 * working connection whose options carry the secret. Each app runs in its own process (the
 * secret probe): every log line, every error inspected at full depth, greppped for the sentinel.
 * The causes stay useful: the driver's code and the address it tried.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { TypeormBackendConfig } from '../../lib/backends/backend-config';
import { findFreePort } from '../../servers/child-processes';
import {
  createMariadbUser,
  dataSourceOptions,
  dropTable,
  uniqueTableName,
  type MariadbUser,
} from '../../servers/databases';
import { leaks, runSecretProbe, SENTINEL, type ProbeResult } from './probe';

/** The calls the probe drives once the app is up. */
const CALLS = ['acquire', 'tryAcquire', 'withLock', 'isLocked', 'inspect', 'forceRelease'];

/**
 * Every call failed with LOCK_BACKEND, its inspected error naming `cause` (the driver's code
 * and message), and health reported the backend down with the driver's message `reason`.
 */
function expectEveryCallFailed(result: ProbeResult, cause: RegExp, reason: RegExp): void {
  for (const call of CALLS) {
    expect({ call, code: result.codes[call] }).toEqual({ call, code: 'LOCK_BACKEND' });
    expect(result.outcomes[call]).toMatch(cause);
    expect(result.outcomes[call]).toMatch(reason);
  }
  expect(result.outcomes.health).toMatch(/status: 'down'/);
  expect(result.outcomes.health).toMatch(reason);
}

/** What MariaDB answers a wrong password with. */
const ACCESS_DENIED = /ER_ACCESS_DENIED_ERROR/;
const ACCESS_DENIED_REASON =
  /Access denied for user 'ndl_test_\w+'@'127\.0\.0\.1' \(using password: YES\)/;

describe('secret probe: typeorm backend', () => {
  let user: MariadbUser;
  let closedPort: number;
  const tables: string[] = [];

  beforeAll(async () => {
    user = await createMariadbUser();
    closedPort = await findFreePort(); // nothing listens there
  });
  afterAll(async () => {
    await user?.drop();
    for (const table of tables) await dropTable('postgres', table).catch(() => undefined);
  });

  /** MariaDB options for the throwaway user, with the sentinel as its (wrong) password. */
  const wrongPassword = (): Record<string, unknown> => ({
    ...dataSourceOptions('mariadb', { poolSize: 3 }),
    username: user.username,
    password: SENTINEL,
  });

  it('a wrong MariaDB password fails the bootstrap (startup: fail) without writing it', async () => {
    const result = await runSecretProbe({ type: 'typeorm', dataSourceOptions: wrongPassword() });
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBe('LOCK_BACKEND');
    expect(result.outcomes.bootstrap).toMatch(ACCESS_DENIED);
    expect(result.outcomes.bootstrap).toMatch(ACCESS_DENIED_REASON);
  }, 90_000);

  it('a wrong MariaDB password, started degraded: every call and health fail with the cause, nothing written', async () => {
    const result = await runSecretProbe({
      type: 'typeorm',
      dataSourceOptions: wrongPassword(),
      strategy: 'for-update',
      startup: 'degraded',
    });
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBeUndefined();
    expectEveryCallFailed(result, ACCESS_DENIED, ACCESS_DENIED_REASON);
    expect(result.output).toMatch(/started degraded/); // the warning, without the password
  }, 90_000);

  it('a password in a postgres:// URL to a closed port: ECONNREFUSED with the address, never the password', async () => {
    const result = await runSecretProbe({
      type: 'typeorm',
      dataSourceOptions: {
        type: 'postgres',
        url: `postgres://probe:${SENTINEL}@127.0.0.1:${closedPort}/locktest`,
      },
      strategy: 'advisory',
      startup: 'degraded',
    });
    expect(leaks(result.output)).toEqual([]);
    const refused = new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}`);
    expectEveryCallFailed(result, /code: 'ECONNREFUSED'/, refused);
  }, 90_000);

  it('a DataSource passed in (wrong MariaDB password): the module connects it, never writes the password', async () => {
    const config: TypeormBackendConfig = { type: 'typeorm', dataSourceOptions: wrongPassword() };
    const result = await runSecretProbe(config, {
      setup: 'test/secrets/typeorm-datasource-setup.ts',
    });
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBeUndefined();
    expectEveryCallFailed(result, ACCESS_DENIED, ACCESS_DENIED_REASON);
  }, 90_000);

  it('a pg Pool passed as client (type sql), its password in a URL to a closed port: ECONNREFUSED, never the password', async () => {
    const result = await runSecretProbe(
      {
        type: 'sql',
        client: {
          connectionString: `postgres://probe:${SENTINEL}@127.0.0.1:${closedPort}/locktest`,
        },
        strategy: 'advisory',
      },
      { setup: 'test/secrets/pg-pool-setup.ts' },
    );
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBeUndefined();
    const refused = new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}`);
    expectEveryCallFailed(result, /code: 'ECONNREFUSED'/, refused);
  }, 90_000);

  it('a mysql2 pool passed as client (type sql) with a wrong MariaDB password: every call fails with the cause, nothing written', async () => {
    const o = wrongPassword();
    const result = await runSecretProbe(
      {
        type: 'sql',
        client: {
          host: o.host,
          port: o.port,
          user: o.username,
          password: SENTINEL,
          database: o.database,
          connectionLimit: 3,
        },
        strategy: 'advisory',
      },
      { setup: 'test/secrets/mysql2-pool-setup.ts' },
    );
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes.bootstrap).toBeUndefined();
    expectEveryCallFailed(result, ACCESS_DENIED, ACCESS_DENIED_REASON);
  }, 90_000);

  it('a working pg Pool (type sql) whose options carry a password: every call answers, nothing written', async () => {
    const tableName = uniqueTableName('secret');
    tables.push(tableName);
    const o = dataSourceOptions('postgres');
    const result = await runSecretProbe(
      {
        type: 'sql',
        client: {
          host: o.host,
          port: o.port,
          user: o.username,
          database: o.database,
          password: SENTINEL,
          max: 3,
        },
        strategy: 'for-update',
        tableName,
        createTable: true,
      },
      { setup: 'test/secrets/pg-pool-setup.ts' },
    );
    expect(leaks(result.output)).toEqual([]);
    expect(result.codes).toEqual({ withLock: 'LOCK_NOT_ACQUIRED' });
    expect(result.outcomes.forceRelease).toMatch(/^true/);
    expect(result.outcomes.health).toMatch(/status: 'up'/);
  }, 90_000);

  it('a working connection whose options carry a password: every call answers, nothing written', async () => {
    // The machine's Postgres trusts 127.0.0.1: the password is sent nowhere, yet it is in the
    // options every part of the module (and TypeORM, and the driver) sees. The probe prints
    // the lock handle acquire returns at full depth: nothing reachable from it may hold the
    // password (the backend keeps its DataSource in private fields; so must the core's
    // Redactor keep the secrets it knows).
    const tableName = uniqueTableName('secret');
    tables.push(tableName);
    const result = await runSecretProbe({
      type: 'typeorm',
      dataSourceOptions: { ...dataSourceOptions('postgres', { poolSize: 3 }), password: SENTINEL },
      strategy: 'for-update',
      tableName,
      createTable: true,
    });
    expect(leaks(result.output)).toEqual([]);
    // The probe's acquire keeps the key: the later calls meet it held, and forceRelease ends
    // the holder's session (its own).
    expect(result.codes).toEqual({ withLock: 'LOCK_NOT_ACQUIRED' });
    expect(result.outcomes.tryAcquire).toMatch(/^null/);
    expect(result.outcomes.inspect).toMatch(
      /held: true, fence: \d+, holders: 1, waiting: 0, mine: true/,
    );
    expect(result.outcomes.forceRelease).toMatch(/^true/);
    expect(result.outcomes.health).toMatch(/status: 'up'/);
  }, 90_000);
});
