/**
 * The sample app's configuration, read once from environment variables (documented in
 * sample-app/README.md). With none set, everything lives in one SQLite file: no servers needed.
 * Every value is validated here, so a typo fails at startup with the variable's name instead
 * of surfacing later as a confusing runtime error.
 */

import { shortestIntervalMs } from './report-schedule';

// Each set of choices is listed once, as a value (validation needs it at runtime), and its type
// is derived from that list, so the two cannot drift apart.
const DEDUCT_MODES = ['lock', 'none', 'optimistic'] as const;
const STORES = ['sqlite', 'postgres', 'mariadb'] as const;
const LOCK_BACKENDS = [
  'sqlite',
  'memory',
  'redis',
  'redlock',
  'zookeeper',
  'postgres',
  'mariadb',
] as const;
const STRATEGIES = ['table', 'for-update', 'advisory'] as const;

/** How a deduction is protected against concurrent deductions of the same SKU. */
export type DeductMode = (typeof DEDUCT_MODES)[number];

/** The scheduled stock report (report-job.ts), when REPORT_CRON turns it on. */
export interface ReportConfig {
  /** Cron expression (6 fields with seconds, or 5), validated. */
  schedule: string;
  /** Lease of the report's leadership: how long a crashed leader's ticks go unrun at most. */
  leaderTtlMs: number;
  /** File to append one JSON line per run to, or `null`. */
  runsFile: string | null;
}

/** The price list (pricing.service.ts): what makes a half-written price visible. */
export interface PricingConfig {
  /** How long a price read holds its shared lock (rendering a quote), so readers overlap. */
  readMs: number;
  /** Pause between a re-price's two writes: the window in which an unlocked reader sees a tear. */
  repriceStepMs: number;
}

/** The fake payment provider (payment-provider.ts) and the counted lock in front of it. */
export interface PaymentsConfig {
  /** Concurrent requests the provider accepts, and the `permits` of the lock guarding it. */
  limit: number;
  /** How long one provider call takes. */
  latencyMs: number;
}

/** Where products, segments and the order ledger live. */
export type StoreKind = (typeof STORES)[number];

/** Which store the distributed locks live in. */
export type LockBackendKind = (typeof LOCK_BACKENDS)[number];

/** How the SQL lock backends (`sqlite`, `postgres`, `mariadb`) hold a lock. */
export type SqlLockStrategy = (typeof STRATEGIES)[number];

/** Connection settings of one SQL database. */
export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | {
      kind: 'postgres' | 'mariadb';
      host: string;
      port: number;
      user: string;
      password: string;
      database: string;
    };

/** Everything the app needs to know, parsed from the environment. */
export interface AppConfig {
  /** HTTP port; 0 picks a free one (the actual URL is printed at startup). */
  port: number;
  /** Interface to listen on. */
  host: string;
  /** The product store. */
  store: DatabaseConfig;
  /** The lock store. */
  lock: {
    backend: LockBackendKind;
    /** SQL backends only. */
    strategy: SqlLockStrategy;
    /** The SQL database of a SQL lock backend. */
    database?: DatabaseConfig;
    redisUrl: string;
    redlockUrls: string[];
    zkConnect: string;
    /** Lease of a lock, renewed while held. */
    ttlMs: number;
    /** How long a deduction waits for a busy lock before answering 409. */
    waitMs: number;
    /** Connection pool of a postgres/mariadb lock backend (each held lock may pin one). */
    poolSize: number;
    /**
     * Redis and Redlock: ms a node that (re)started grants nothing (the library's
     * `restartGuard`); `false` (LOCK_RESTART_GUARD_MS=off) for a node that keeps its data.
     * Default: the lock ttl.
     */
    restartGuardMs: number | false;
  };
  /** How deductions are protected. */
  mode: DeductMode;
  /** Segments a product is split into when it is created or reset (1 = unsegmented). */
  segments: number;
  /**
   * Pause between reading the stock and writing it back, standing in for the work a real
   * order does there (pricing, payment authorisation). It widens the race window that the
   * lock closes, the same way in every mode, so runs in different modes compare fairly.
   */
  workMs: number;
  /** The price list's timings. */
  pricing: PricingConfig;
  /** The payment provider's limit and latency. */
  payments: PaymentsConfig;
  /** Prefix of the app's table names, lock table included (isolates test runs on one database). */
  tablePrefix: string;
  /** Exit when stdin closes: set by launchers so an app never outlives them. */
  exitWithParent: boolean;
  /** The scheduled report; `null` (the default, or REPORT_CRON=off) schedules nothing. */
  report: ReportConfig | null;
}

/** An environment variable with a bad value. */
export class ConfigError extends Error {
  constructor(variable: string, detail: string) {
    super(`${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Table names are spliced into SQL, so the prefix must be a plain identifier start. */
const TABLE_PREFIX = /^[a-z][a-z0-9_]{0,30}$/;

/** Parses and validates the configuration; throws `ConfigError` naming the variable. */
export function loadConfig(env: Env = process.env): AppConfig {
  const store = oneOf(env, 'STORE', STORES, 'sqlite');
  const backend = oneOf(env, 'LOCK_BACKEND', LOCK_BACKENDS, 'sqlite');
  const strategy = oneOf(env, 'LOCK_STRATEGY', STRATEGIES, 'table');
  if (backend === 'sqlite' && strategy !== 'table') {
    // SQLite has neither row locks nor advisory locks: only lease rows work there.
    throw new ConfigError('LOCK_STRATEGY', `SQLite supports only "table", got "${strategy}"`);
  }
  const redlockUrls = (env.REDLOCK_URLS ?? '')
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
  if (backend === 'redlock' && redlockUrls.length === 0) {
    throw new ConfigError(
      'REDLOCK_URLS',
      'LOCK_BACKEND=redlock needs comma-separated redis:// URLs',
    );
  }
  const ttlMs = integer(env, 'LOCK_TTL_MS', 10_000, 100, 3_600_000);
  const tablePrefix = env.TABLE_PREFIX ?? '';
  if (tablePrefix !== '' && !TABLE_PREFIX.test(tablePrefix)) {
    throw new ConfigError('TABLE_PREFIX', `must match ${TABLE_PREFIX}, got "${tablePrefix}"`);
  }
  return {
    port: integer(env, 'PORT', 3000, 0, 65_535),
    host: env.HOST || '127.0.0.1',
    store: database(env, store),
    lock: {
      backend,
      strategy,
      database:
        backend === 'sqlite' || backend === 'postgres' || backend === 'mariadb'
          ? database(env, backend)
          : undefined,
      redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
      redlockUrls,
      zkConnect: env.ZK_CONNECT || '127.0.0.1:2181',
      ttlMs,
      waitMs: integer(env, 'LOCK_WAIT_MS', 10_000, 0, 3_600_000),
      poolSize: integer(env, 'LOCK_POOL_SIZE', 20, 2, 1_000),
      restartGuardMs:
        env.LOCK_RESTART_GUARD_MS === 'off'
          ? false
          : integer(env, 'LOCK_RESTART_GUARD_MS', ttlMs, 0, 86_400_000),
    },
    mode: oneOf(env, 'DEDUCT_MODE', DEDUCT_MODES, 'lock'),
    segments: integer(env, 'SEGMENTS', 1, 1, 64),
    workMs: integer(env, 'DEDUCT_WORK_MS', 5, 0, 60_000),
    pricing: {
      readMs: integer(env, 'PRICE_READ_MS', 10, 0, 60_000),
      repriceStepMs: integer(env, 'REPRICE_STEP_MS', 20, 0, 60_000),
    },
    payments: {
      // At most the library's MAX_PERMITS; a real provider's limits are far below it anyway.
      limit: integer(env, 'PAYMENT_PROVIDER_LIMIT', 3, 1, 64),
      latencyMs: integer(env, 'PAYMENT_LATENCY_MS', 50, 0, 60_000),
    },
    tablePrefix,
    exitWithParent: env.EXIT_WITH_PARENT === '1',
    report: report(env),
  };
}

/** One line describing the setup, printed at startup. */
export function describeConfig(config: AppConfig): string {
  const where = (db: DatabaseConfig): string =>
    db.kind === 'sqlite' ? `sqlite ${db.file}` : `${db.kind} ${db.host}:${db.port}/${db.database}`;
  const { lock } = config;
  const lockStore =
    lock.database !== undefined ? `${where(lock.database)}, ${lock.strategy}` : lock.backend;
  return `store=${where(config.store)} lock=${lock.backend} (${lockStore}) mode=${config.mode} segments=${config.segments}`;
}

/**
 * What differs between the two database servers: the names of their variables and two
 * defaults. Everything else (host, database name, the rules) is read the same way for both by
 * `database()`, so it is written once.
 */
const SERVER_DATABASES = {
  postgres: {
    vars: {
      host: 'PGHOST',
      port: 'PGPORT',
      user: 'PGUSER',
      password: 'PGPASSWORD',
      database: 'PGDATABASE',
    },
    port: 5432,
    user: 'postgres',
  },
  mariadb: {
    vars: {
      host: 'MYSQL_HOST',
      port: 'MYSQL_PORT',
      user: 'MYSQL_USER',
      password: 'MYSQL_PASSWORD',
      database: 'MYSQL_DATABASE',
    },
    port: 3306,
    user: 'root',
  },
} as const;

function database(env: Env, kind: StoreKind): DatabaseConfig {
  if (kind === 'sqlite') return { kind, file: env.SQLITE_FILE || '.tmp/inventory.sqlite' };
  const { vars, port, user } = SERVER_DATABASES[kind];
  return {
    kind,
    host: env[vars.host] || '127.0.0.1',
    port: integer(env, vars.port, port, 1, 65_535),
    user: env[vars.user] || user,
    password: env[vars.password] ?? '',
    database: env[vars.database] || 'inventory',
  };
}

function report(env: Env): ReportConfig | null {
  const schedule = (env.REPORT_CRON ?? '').trim();
  // Opt-in: a job firing by itself would add lock acquisitions and output to every run of the
  // app (the demo, tests counting lock events), not only to those that want a report.
  if (schedule === '' || schedule.toLowerCase() === 'off') return null;
  try {
    shortestIntervalMs(schedule);
  } catch (err) {
    throw new ConfigError('REPORT_CRON', `not a cron expression: ${(err as Error).message}`);
  }
  // A leader that crashed leaves the ticks unrun until its lease runs out: 5 s by default.
  const leaderTtlMs = integer(env, 'REPORT_LEADER_TTL_MS', 5_000, 2_000, 600_000);
  return { schedule, leaderTtlMs, runsFile: env.REPORT_RUNS_FILE || null };
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = allowed.find((candidate) => candidate === raw.trim().toLowerCase());
  if (value === undefined) {
    throw new ConfigError(name, `must be one of ${allowed.join(' | ')}, got "${raw}"`);
  }
  return value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value < min || value > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** DI token of the AppConfig. */
export const APP_CONFIG = Symbol('APP_CONFIG');
