/**
 * Helpers of the sample app's e2e specs: app processes started with a clean environment and
 * always stopped, a temp SQLite file, SKUs no earlier run used.
 */
import { CLEAN_APP_ENV, startApp, type AppProcess } from '../../sample-app/demo/app-process';
import { tempSqliteFile } from '../../servers/databases';

let skuCounter = 0;
/** A SKU no earlier run used (lock fences of external stores outlive a test run). */
export const freshSku = (): string => `sku-${Date.now().toString(36)}-${++skuCounter}`;

/** Starts `envs.length` apps (on top of CLEAN_APP_ENV), runs `work`, always stops them. */
export async function withApps<T>(
  envs: ReadonlyArray<Record<string, string>>,
  work: (apps: AppProcess[]) => Promise<T>,
): Promise<T> {
  const started = await Promise.allSettled(
    envs.map((env, i) => startApp(`app${i}`, { ...CLEAN_APP_ENV, ...env })),
  );
  try {
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    return await work(started.map((s) => (s as PromiseFulfilledResult<AppProcess>).value));
  } finally {
    await Promise.all(
      started.map((s) => (s.status === 'fulfilled' ? s.value.stop() : Promise.resolve())),
    );
  }
}

/** A temp SQLite file for one test, as the app's env; removed by `cleanup`. */
export function sqliteEnv(): { env: Record<string, string>; cleanup(): void } {
  const temp = tempSqliteFile();
  return { env: { SQLITE_FILE: temp.file }, cleanup: temp.cleanup };
}
