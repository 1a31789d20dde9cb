import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Injectable, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Locked,
  LockConfigError,
  LockModule,
  LockService,
  type LockModuleOptions,
} from '../../lib/index';
import { dropTable, uniqueTableName } from '../../servers/databases';
import { settle } from '../support/async';
import { createLockApp } from '../support/lock-app';
import { lateDataSource } from '../support/late-data-source';

/**
 * `@Locked` declarations are checked against the configured backends when the module starts:
 * a method asking `mode: 'shared'` or `permits` of a backend that cannot grant them stops the
 * bootstrap with `LockConfigError` naming the method and the backends that can, instead of
 * failing at its first call (or, worse, silently running as a mutex).
 */

const BACKENDS: LockModuleOptions = {
  backends: {
    main: { type: 'memory' },
    // Redlock grants only mutexes (a slot agreed by a majority of nodes is not built).
    majority: { type: 'redlock', urls: ['redis://127.0.0.1:6379'] },
  },
  defaultBackend: 'main',
};

@Injectable()
class PaymentsOnRedlock {
  @Locked('pay:{0}', { backend: 'majority', permits: 3 })
  async pay(id: string): Promise<string> {
    return id;
  }
}

@Injectable({ scope: Scope.REQUEST })
class PricesOnRedlock {
  @Locked('price:{0}', { backend: 'majority', mode: 'shared' })
  async read(sku: string): Promise<string> {
    return sku;
  }
}

@Injectable()
class ReaderBase {
  @Locked('catalogue', { backend: 'majority', mode: 'shared' })
  async list(): Promise<string[]> {
    return [];
  }
}

/** Inherits a shared `@Locked` method: its parent's declaration is checked too. */
@Injectable()
class CatalogueOnRedlock extends ReaderBase {}

@Injectable()
class PricesOnMemory {
  @Locked('price:{0}', { mode: 'shared' })
  async read(sku: string): Promise<string> {
    return sku;
  }

  @Locked('pay:{0}', { permits: 2 })
  async pay(id: string): Promise<string> {
    return id;
  }

  @Locked('order:{0}', { backend: 'majority' })
  async order(id: string): Promise<string> {
    return id;
  }
}

@Injectable()
class ReadsOnPostgresAdvisory {
  @Locked('slots:{0}', { backend: 'db', permits: 100 })
  async work(id: string): Promise<string> {
    return id;
  }

  @Locked('reads:{0}', { backend: 'db', mode: 'shared' })
  async read(id: string): Promise<string> {
    return id;
  }
}

/** Boots an app with `providers`; the outcome of `init`, and the app closed either way. */
async function boot(providers: Array<new (...args: never[]) => unknown>) {
  const moduleRef = await Test.createTestingModule({
    imports: [LockModule.forRoot(BACKENDS)],
    providers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  const outcome = await settle(app.init());
  return { app, outcome };
}

describe('@Locked declarations checked at bootstrap', () => {
  for (const [label, provider, field, method] of [
    ['permits on Redlock', PaymentsOnRedlock, 'permits', 'PaymentsOnRedlock.pay'],
    ['shared on Redlock, request-scoped', PricesOnRedlock, 'mode', 'PricesOnRedlock.read'],
    ['shared on Redlock, inherited', CatalogueOnRedlock, 'mode', 'ReaderBase.list'],
  ] as const) {
    it(`refuses to start: ${label}`, async () => {
      const { app, outcome } = await boot([provider]);
      try {
        expect(outcome.ok).toBe(false);
        const error = (outcome as { error: unknown }).error;
        expect(error).toBeInstanceOf(LockConfigError);
        expect(error).toMatchObject({ field });
        const message = (error as Error).message;
        expect(message).toContain(method);
        expect(message).toContain('backend "majority"');
        expect(message).toContain('"main"');
      } finally {
        await app.close();
      }
    });
  }

  it('starts when every declaration is grantable, and the methods run', async () => {
    const { app, outcome } = await boot([PricesOnMemory]);
    try {
      expect(outcome).toMatchObject({ ok: true });
      const prices = app.get(PricesOnMemory);
      expect(await prices.read('a')).toBe('a');
      expect(await prices.pay('p')).toBe('p');
      expect(await prices.order('o')).toBe('o');
      // What an app that runs on several stores asks before choosing (no I/O).
      const locks = app.get(LockService);
      expect(locks.supports('shared')).toBe(true);
      expect(locks.supports('permits')).toBe(true);
      expect(locks.supports('shared', { backend: 'majority' })).toBe(false);
      expect(locks.supports('permits', { backend: 'majority' })).toBe(false);
      expect(() => locks.supports('shared', { backend: 'nope' })).toThrow(LockConfigError);
      expect(() => locks.supports('upgrades' as 'shared')).toThrow(LockConfigError);
    } finally {
      await app.close();
    }
  });

  it('learns the database of a DataSource DI makes late before checking: PostgreSQL advisory grants shared and permits', async () => {
    // advisory grants shared locks on PostgreSQL, not on MariaDB (GET_LOCK is exclusive only),
    // and permits above 64 only on PostgreSQL: the check must not refuse what the app's own
    // database can do just because the DataSource did not exist when the backend was made.
    const tableName = uniqueTableName('capds');
    const late = lateDataSource('CAPS_DS');
    try {
      const t = await createLockApp(
        {
          backends: {
            db: {
              type: 'typeorm',
              dataSourceToken: 'CAPS_DS',
              tableName,
              createTable: true,
              strategy: 'advisory',
            },
          },
        },
        { imports: [late.module], providers: [ReadsOnPostgresAdvisory] },
      );
      try {
        expect(t.manager.getBackend('db').capabilities).toMatchObject({
          shared: true,
          permits: true,
        });
        expect(await t.app.get(ReadsOnPostgresAdvisory).work('w')).toBe('w');
        expect(await t.app.get(ReadsOnPostgresAdvisory).read('r')).toBe('r');
      } finally {
        await t.close();
      }
    } finally {
      await late.destroy();
      await dropTable('postgres', tableName);
    }
  }, 30_000);
});
