// The battery's app with the store handed to the module otherwise than in the README's
// forRootAsync example (app.module.ts), picked by LOCK_WIRING in main.ts: `client` passes the
// app's own connected client (own-client.ts, on the cell's Redis client package); `redlock` runs
// Redlock over REDLOCK_URLS. Key prefix, ttl and shutdown come from the environment as there.
import { Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { LockModule, type LockModuleOptions } from 'nestjs-distributed-lock';
import { BASE_IMPORTS, CONTROLLERS, PROVIDERS } from './app.module.js';
import { connectOwnClient } from './own-client.js';

/** The token of the app's own client, as a user's Redis provider would have one. */
export const OWN_CLIENT = Symbol('OWN_CLIENT');

type OwnClient = Awaited<ReturnType<typeof connectOwnClient>>;

/** The options every root module takes from the environment (strings, converted). */
function fromEnv(cfg: ConfigService): Omit<LockModuleOptions, 'backends'> {
  return {
    keyPrefix: cfg.get<string>('LOCK_PREFIX', ''),
    defaults: { ttl: Number(cfg.get('LOCK_TTL_MS') ?? 30_000) },
    shutdown: { timeout: Number(cfg.get('SHUTDOWN_TIMEOUT_MS') ?? 10_000) },
  };
}

/**
 * Closes the app's own client in onApplicationShutdown: every beforeApplicationShutdown,
 * where the lock module releases held locks, has run by then.
 */
@Injectable()
class OwnClientCloser implements OnApplicationShutdown {
  constructor(@Inject(OWN_CLIENT) private readonly own: OwnClient) {}

  async onApplicationShutdown(): Promise<void> {
    await this.own.close();
  }
}

/** The app's own Redis client on REDIS_URL: connected at startup, closed by the app. */
@Module({
  imports: [ConfigModule],
  providers: [
    {
      provide: OWN_CLIENT,
      inject: [ConfigService],
      useFactory: (cfg: ConfigService) => connectOwnClient(cfg.getOrThrow<string>('REDIS_URL')),
    },
    OwnClientCloser,
  ],
  exports: [OWN_CLIENT],
})
class OwnClientModule {}

/** `{ type: 'redis', client }` with the app's own client. */
@Module({
  imports: [
    ...BASE_IMPORTS,
    LockModule.forRootAsync({
      imports: [ConfigModule, OwnClientModule],
      inject: [ConfigService, OWN_CLIENT],
      useFactory: (cfg: ConfigService, own: OwnClient) => ({
        backends: { main: { type: 'redis', client: own.client } },
        ...fromEnv(cfg),
      }),
    }),
  ],
  controllers: CONTROLLERS,
  providers: PROVIDERS,
})
export class ClientAppModule {}

/** `{ type: 'redlock', urls }`: the module makes one client per node with the installed package. */
@Module({
  imports: [
    ...BASE_IMPORTS,
    LockModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (cfg: ConfigService) => ({
        backends: {
          main: {
            type: 'redlock',
            urls: cfg.getOrThrow<string>('REDLOCK_URLS').split(','),
            // Nodes started empty for this run hold no lease they could have forgotten.
            restartGuard: false,
          },
        },
        ...fromEnv(cfg),
      }),
    }),
  ],
  controllers: CONTROLLERS,
  providers: PROVIDERS,
})
export class RedlockAppModule {}
