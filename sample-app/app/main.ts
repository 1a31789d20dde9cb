/**
 * Starts the inventory sample app: `node -r ./scripts/ts-register.cjs sample-app/app/main.ts`
 * (or `npm run sample-app`). Configuration: environment variables, see sample-app/README.md.
 * Prints one line `Inventory app listening on <url> (...)` once it serves requests.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { ConfigError, describeConfig, loadConfig, type AppConfig } from './app-config';
import { startMetrics } from './metrics';

async function bootstrap(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`Invalid configuration: ${err.message}`);
    process.exit(2);
  }
  // Before the app exists: the lock module looks up its OpenTelemetry meter when it starts.
  const metrics = startMetrics();
  const creating = NestFactory.create(AppModule.forRoot(config, metrics), {
    logger: ['error', 'warn'],
  });
  if (config.exitWithParent) {
    // The launcher holds our stdin open; EOF means it is gone, however it died. Watched from
    // the start, so that an app still booting when its launcher dies does not linger either.
    process.stdin.once('end', () => {
      void creating.then((app) => app.close()).finally(() => process.exit(0));
    });
    process.stdin.resume();
  }
  const app = await creating;
  // SIGTERM / SIGINT close the app: held locks released, connections closed.
  app.enableShutdownHooks();
  await app.listen(config.port, config.host);
  console.log(`Inventory app listening on ${await app.getUrl()} (${describeConfig(config)})`);
}

bootstrap().catch((err: unknown) => {
  console.error('Inventory app failed to start:', err);
  process.exit(1);
});
