import { LockConfigError } from '../../errors/lock.errors';

/**
 * Loads an optional peer package (ioredis, redlock, node-zookeeper-client, typeorm) only when
 * a backend that needs it is configured, so a user of one backend installs only that one.
 * A missing package becomes a `LockConfigError` that names the package to install.
 *
 * `exportName` names an export the caller needs: a CommonJS package loaded through `import()`
 * may put its exports under `default` (or be the export itself, as redlock is), and this
 * returns whichever object carries it.
 */
export async function loadOptionalPackage<T extends object>(
  packageName: string,
  field: string,
  usedFor: string,
  exportName: keyof T,
  loader: () => Promise<unknown> = () => import(packageName),
): Promise<T> {
  let loaded: unknown;
  try {
    loaded = await loader();
  } catch (err) {
    if (isModuleNotFound(err)) {
      throw new LockConfigError(
        field,
        `${usedFor} needs the optional package "${packageName}", which is not installed: run \`npm install ${packageName}\``,
      );
    }
    throw err;
  }
  // `default` first: a CommonJS export loaded through an interop helper is copied onto a
  // namespace object that has its properties but is not it (redlock's class is the export).
  for (const candidate of [(loaded as { default?: unknown } | null)?.default, loaded]) {
    if (candidate !== null && (typeof candidate === 'object' || typeof candidate === 'function')) {
      if ((candidate as Record<PropertyKey, unknown>)[exportName as PropertyKey] !== undefined) {
        return candidate as T;
      }
    }
  }
  throw new LockConfigError(
    field,
    `the installed "${packageName}" has no ${String(exportName)} export: install a supported version`,
  );
}

/** Whether `err` is Node's "cannot find module" (CommonJS or ES module loader). */
export function isModuleNotFound(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
}
