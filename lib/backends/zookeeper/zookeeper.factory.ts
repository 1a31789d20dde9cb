import { LockBackendError, LockConfigError } from '../../errors/lock.errors';
import type { BackendFactory } from '../../core/contract/backend-factory';
import { loadOptionalPackage } from '../../core/shared/optional-package';
import { checkDuration, checkOptions } from '../../core/shared/options';
import type { ZookeeperBackendConfig } from '../backend-config';
import { connectionStringProblem, znodePathProblem } from './zk-config-checks';
import { ZkSession } from './zk-session';
import type { ZkModule } from './zk-types';
import { ZookeeperLockBackend } from './zookeeper.backend';

const KEYS: ReadonlySet<string> = new Set([
  'type',
  'connectionString',
  'rootPath',
  'sessionTimeout',
  'auth',
  'acl',
  'connectTimeout',
  'startup',
]);
const DEFAULT_ROOT = '/nestjs-distributed-lock';
const DEFAULT_SESSION_TIMEOUT_MS = 10_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 15_000;

/** `type: 'zookeeper'`. */
export const zookeeperBackendFactory: BackendFactory<ZookeeperBackendConfig> = {
  validate(config, field) {
    checkOptions(config, KEYS, field, `${field}.`, 'unknown option for a zookeeper backend');
    const cs = config.connectionString;
    const csProblem =
      typeof cs === 'string' ? connectionStringProblem(cs) : 'is required (a string)';
    if (csProblem) {
      throw new LockConfigError(
        `${field}.connectionString`,
        `must be "host:port[,host:port...][/chroot]": ${csProblem}`,
      );
    }
    const root = config.rootPath;
    const rootProblem =
      root === undefined
        ? undefined
        : typeof root === 'string'
          ? znodePathProblem(root)
          : 'is not a string';
    if (rootProblem) {
      throw new LockConfigError(
        `${field}.rootPath`,
        `must be an absolute znode path such as "/locks": ${rootProblem}`,
      );
    }
    for (const opt of ['sessionTimeout', 'connectTimeout'] as const) {
      if (config[opt] !== undefined) checkDuration(config[opt], `${field}.${opt}`);
    }
    if (config.auth !== undefined) {
      if (!Array.isArray(config.auth))
        throw new LockConfigError(`${field}.auth`, 'must be an array of { scheme, credentials }');
      config.auth.forEach((a: unknown, i: number) => {
        const entry = a as { scheme?: unknown; credentials?: unknown } | null;
        if (
          typeof entry?.scheme !== 'string' ||
          typeof entry.credentials !== 'string' ||
          !entry.scheme ||
          !entry.credentials
        ) {
          throw new LockConfigError(
            `${field}.auth[${i}]`,
            'must be { scheme: "digest", credentials: "user:password" }',
          );
        }
      });
    }
    if (config.acl !== undefined && config.acl !== 'open' && config.acl !== 'creator') {
      throw new LockConfigError(`${field}.acl`, "must be 'open' or 'creator'");
    }
    if (
      config.startup !== undefined &&
      config.startup !== 'fail' &&
      config.startup !== 'degraded'
    ) {
      throw new LockConfigError(`${field}.startup`, "must be 'fail' or 'degraded'");
    }
    if (config.acl === 'creator' && !config.auth?.length) {
      throw new LockConfigError(
        `${field}.acl`,
        "'creator' needs auth credentials (the creator is the authenticated identity)",
      );
    }
  },

  async create(config, name, { redactor }) {
    const field = `backends.${name}`;
    const zk = await loadOptionalPackage<ZkModule>(
      'node-zookeeper-client',
      field,
      'the zookeeper backend',
      'createClient',
    );
    const rootPath = config.rootPath ?? DEFAULT_ROOT;
    const auth = config.auth ?? [];
    // With credentials, lock nodes default to "creator only": a client without them can
    // neither create nor delete nodes under the lock root.
    const acls =
      (config.acl ?? (auth.length ? 'creator' : 'open')) === 'creator'
        ? zk.ACL.CREATOR_ALL_ACL
        : zk.ACL.OPEN_ACL_UNSAFE;
    const session = new ZkSession(zk, {
      connectionString: config.connectionString,
      sessionTimeout: config.sessionTimeout ?? DEFAULT_SESSION_TIMEOUT_MS,
      auth,
      probePath: '/',
      label: `zookeeper backend "${name}"`,
      redactor,
    });
    try {
      await session.start(config.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT_MS, config.startup);
    } catch (err) {
      throw new LockBackendError(
        name,
        `ZooKeeper unreachable at startup (startup: 'fail'): ${redactor.message(err)}`,
        { cause: redactor.error(err) },
      );
    }
    return new ZookeeperLockBackend(zk, session, rootPath, acls, name, redactor);
  },
};
