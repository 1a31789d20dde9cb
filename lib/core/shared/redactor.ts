import type { SecretRedactor } from '../contract/backend-factory';
import { messageOf } from './error-message';

/** What stands in for a secret in every text the module writes. */
export const REDACTED = '***';

/** Option names whose string values are secrets, wherever they appear in a configuration. */
const SECRET_KEY =
  /(^|[a-z_])pass(word|wd|phrase)?$|^(secret|credentials?|token|access_?token|api_?key|private_?key|key)$/i;
/** `scheme://user:password@host` (and `scheme://:password@host`, `scheme://token@host`). */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^/@\s:]*)(?::([^/@\s]*))?@/gi;
/** Error fields that say what went wrong without carrying data: kept on a redacted cause. */
const SAFE_FIELDS = [
  'code',
  'errno',
  'syscall',
  'address',
  'port',
  'hostname',
  'severity',
  'sqlState',
] as const;
/** How deep a configuration or a `cause` chain is walked. */
const MAX_DEPTH = 6;
/** Secrets shorter than this are not searched for in text (they would redact ordinary words). */
const MIN_SECRET_LENGTH = 3;

/**
 * Keeps secrets out of everything the module writes: log lines, error messages, `cause` chains.
 * It knows the secrets of one module's configuration (passwords, ACL and digest credentials,
 * tokens, the password part of connection URLs) and scrubs them from text; an error from a store
 * client becomes a {@link RedactedError}: its message scrubbed, only fields that carry no data
 * (code, errno, address, port...) kept, its own cause redacted in turn. A client error object
 * itself (ioredis keeps the `AUTH` arguments on it) never leaves the module.
 */
export class Redactor implements SecretRedactor {
  /** ES-private: `util.inspect` of anything that reaches the redactor cannot print them. */
  readonly #secrets: string[];

  constructor(secrets: Iterable<string> = []) {
    // Longest first, so a secret that contains another is replaced whole.
    this.#secrets = [...new Set(secrets)]
      .filter((s) => s.length >= MIN_SECRET_LENGTH)
      .sort((a, b) => b.length - a.length);
  }

  /** A redactor for the secrets found in `config` (a module's or a backend's options). */
  static of(config: unknown): Redactor {
    return new Redactor(secretsIn(config));
  }

  /** `text` with every known secret and every URL password replaced by `***`. */
  text(text: string): string {
    let out = text.replace(URL_USERINFO, (_m, scheme: string, user: string, pass?: string) =>
      pass === undefined ? `${scheme}${user ? REDACTED : ''}@` : `${scheme}${user}:${REDACTED}@`,
    );
    for (const secret of this.#secrets) out = out.split(secret).join(REDACTED);
    return out;
  }

  /** The message of any thrown value, redacted. */
  message(err: unknown): string {
    return this.text(messageOf(err));
  }

  /**
   * A copy of `err` safe to keep as a `cause` or to log: `undefined` stays `undefined`; any
   * other value becomes a {@link RedactedError}.
   */
  error(err: unknown, depth = 0): RedactedError | undefined {
    if (err === undefined || err === null) return undefined;
    if (err instanceof RedactedError) return err;
    const source = (typeof err === 'object' ? err : {}) as Record<string, unknown>;
    const copy = new RedactedError(
      this.text(messageOf(err)),
      typeof source.name === 'string' ? source.name : typeof err,
    );
    for (const field of SAFE_FIELDS) {
      const value = source[field];
      if (typeof value === 'string') copy[field] = this.text(value);
      else if (typeof value === 'number') copy[field] = value;
    }
    if (typeof source.stack === 'string') copy.stack = this.text(source.stack);
    if (depth < MAX_DEPTH && source.cause !== undefined) {
      Object.defineProperty(copy, 'cause', {
        value: this.error(source.cause, depth + 1),
        enumerable: false,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  }
}

/**
 * A store client's error, redacted: its name, scrubbed message and stack, and only the fields
 * that say what failed (`code`, `errno`, `syscall`, `address`, `port`...), never the command,
 * its arguments or the client's options.
 */
export class RedactedError extends Error {
  /** Error code of the original (`ECONNREFUSED`, `28P01`, `NOAUTH`...). */
  code?: string | number;
  /** Numeric errno of the original. */
  errno?: string | number;
  /** The system call that failed. */
  syscall?: string | number;
  /** The address the client tried. */
  address?: string | number;
  /** The port the client tried. */
  port?: string | number;
  /** The host name a DNS lookup failed for. */
  hostname?: string | number;
  /** Database severity (PostgreSQL). */
  severity?: string | number;
  /** SQL state (MySQL/MariaDB). */
  sqlState?: string | number;

  constructor(
    message: string,
    /** The original error's name (`ReplyError`, `QueryFailedError`...). */
    readonly originalName: string,
  ) {
    super(message);
    this.name = originalName;
  }
}

/** Where a client object passed in keeps what it connects with (see `secretsIn`). */
const CLIENT_SECRET_PLACES = ['options', 'config', 'connectionConfig', 'pool', 'password'] as const;

/** Every secret string in a configuration: values of secret-named options, URL passwords. */
export function secretsIn(config: unknown): string[] {
  const found: string[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown, key: string, depth: number): void => {
    if (typeof value === 'string') {
      if (SECRET_KEY.test(key)) found.push(value, ...credentialParts(value));
      for (const match of value.matchAll(URL_USERINFO)) {
        if (match[3]) found.push(decodeSafely(match[3]), match[3]);
      }
      return;
    }
    if (typeof value !== 'object' || value === null || depth > MAX_DEPTH || seen.has(value)) {
      return;
    }
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) visit(item, key, depth + 1);
      return;
    }
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto === Object.prototype || proto === null) {
      // Own names, not entries: a property kept off the enumerable ones (as `pg` keeps a
      // Pool's `options.password`) is read too.
      const record = value as Record<string, unknown>;
      for (const k of Object.getOwnPropertyNames(record)) visit(record[k], k, depth + 1);
    } else {
      // A client or DataSource the user passed in: its secrets sit in its `options` (TypeORM,
      // `pg`), or its `config` and that config's `connectionConfig` (a `mysql2` pool), or the
      // pool it wraps (a `mysql2` promise pool).
      const holder = value as Record<string, unknown>;
      for (const part of CLIENT_SECRET_PLACES) visit(holder[part], part, depth + 1);
    }
  };
  visit(config, '', 0);
  return found;
}

/** `user:password` (ZooKeeper digest): the password alone is a secret too. */
function credentialParts(value: string): string[] {
  const colon = value.indexOf(':');
  return colon > 0 ? [value.slice(colon + 1)] : [];
}

function decodeSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
