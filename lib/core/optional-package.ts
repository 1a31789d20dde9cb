import { LockConfigError } from '../errors/lock.errors';

/**
 * Loads an optional peer package (ioredis, redlock, node-zookeeper-client, typeorm) only when
 * a backend that needs it is configured, so a user of one backend installs only that one.
 * A missing package becomes a `LockConfigError` that names the package to install.
 */
export async function loadOptionalPackage<T>(
  packageName: string,
  field: string,
  usedFor: string,
  loader: () => Promise<T> = () => import(packageName) as Promise<T>,
): Promise<T> {
  try {
    return await loader();
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') {
      throw new LockConfigError(
        field,
        `${usedFor} needs the optional package "${packageName}", which is not installed: run \`npm install ${packageName}\``,
      );
    }
    throw err;
  }
}
