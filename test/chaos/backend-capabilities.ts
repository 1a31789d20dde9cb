import type { LockBackendCapabilities } from '../../lib/core/contract/lock-backend';
import { createLockApp } from '../support/lock-app';
import type { ChaosBackend, ChaosTiming } from './backends';

/**
 * What a chaos column's backend declares, read from the backend itself: an app is built from
 * the options a worker gets (so the same configuration), asked, and closed. The matrix gives a
 * column the sharing rows whose capability this declares, and only those: no list of capable
 * backends to keep in step with the code.
 */
export async function declaredCapabilities(
  backend: ChaosBackend,
  timing: ChaosTiming,
): Promise<LockBackendCapabilities> {
  const options = backend.options((endpoint) => endpoint, timing);
  const app = await createLockApp(options);
  try {
    const [name] = Object.keys(options.backends);
    return app.manager.getBackend(name).capabilities;
  } finally {
    await app.close();
  }
}
